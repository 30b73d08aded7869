"""What the compiled programs print, read back: llama.cpp's own test's counts and failures, the
harness's allowed ranges, the sampler's `llg error:` lines, and why a program died.

The test binaries and the harness write to two streams, and the sampler's log arrives from another
thread, so lines interleave differently from run to run: every reader here searches the whole text
for what it wants rather than trusting positions.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import InputError
from ...overrides import ENV, Override, check_log, env
from .builder import TEST_TIMEOUT, bin_dir, venv_llguidance
from .crashes import crash_cause, tidy

# -- llama.cpp's own test --------------------------------------------------------------------
_COUNTS = re.compile(r"^(test_no_space_tokens|test_forced_mask_bytes): allowed=(\d+) bad=(\d+)$", re.M)
_FORCED_TOKEN = re.compile(r"^    (?:✅︎|❌) (\d+) '", re.M)
# test_sampler_chain prints each token it applies, then what the chain selected
_CHAIN = re.compile(r"applying token: (-?\d+)\n?(?: -> (-?\d+))?")


@dataclass(frozen=True)
class TestRun:
    """One run of a `test-grammar-llguidance` binary on one vocab."""

    test: str  # "shipped" or "pr"
    sampler: str  # "upstream" or "fixed"
    exit_code: int  # as a shell shows it: 128 + signal for a signal (134: abort)
    space_allowed: int | None = None  # test_no_space_tokens (PR only): allowed at position 0
    space_bad: int | None = None  # of those, with a space in the real piece
    forced_allowed: int | None = None  # test_forced_mask_bytes (PR only)
    forced_bad: int | None = None  # allowed tokens whose piece is not a prefix of the literal
    forced_tokens: tuple[int, ...] = ()
    string_tests: str = "ran"  # "ran", "skipped" (the PR's guard finds the tokenizer inexact) or "not reached"
    failure: str = ""  # the first failing check, as the test printed it
    llg_error: str = ""  # the first error the sampler logged (it then drops its grammar), first line
    llguidance: str = ""  # the version the binary links
    assertion: str = ""  # the failed assertion (C assert or GGML_ASSERT), as `file:line: ...`, directories out
    chain_token: int | None = None  # test_sampler_chain: the last token it applied
    chain_selected: int | None = None  # and what the chain selected for it (None: it aborted first)
    cause: str = ""  # why it exited non-zero, from what the test and the sampler did (`causes.classify`)
    rule: str = ""  # the rule that named it (`causes.RULES`)

    @property
    def passed(self) -> bool:
        return self.exit_code == 0


def _failure(err: str, code: int = 1, out: str = "") -> str:
    """The first failing string test, with the test it belongs to, or the failed assertion; for a
    process a signal ended with neither, why it died (`crash_cause`).

    The test prints each string to stderr without a newline (its tick goes to stdout), and the
    sampler's log arrives from another thread, so a failing string and its cross can be lines
    apart: both are searched in the whole text, not per line.
    """
    cross = re.search(r"❌ \(([^)]*)\)", err)
    if cross:
        before = err[: cross.start()]
        strings = re.findall(r'"[^"\n]*"', before[before.rfind("🔵 Valid strings") :] if "🔵" in before else before)
        header = before.rsplit("⚫ Testing ", 1)
        testing = re.split(r"\. (?:Grammar|Schema):", header[1])[0].strip() if len(header) == 2 else ""
        what = f"{strings[-1]} {cross[1]}" if strings else cross[1]
        return f"{what} in {testing!r}" if testing else what
    for ln in reversed(err.splitlines()):
        # "BINARY: /path/to/test-grammar-llguidance.cpp:1286: int main(...): Assertion `x' failed."
        if m := re.search(r"([\w.-]+\.cpp:\d+): .*?(Assertion .*)$", ln):
            return f"{m[1]}: {m[2]}"
    if code >= 128:  # killed by a signal: why, from both streams (ggml's gdb backtrace is no cause)
        return crash_cause(out + "\n" + err, code)
    said = [ln.strip() for ln in err.splitlines() if "error" in ln.lower()]
    return said[-1] if said else ""


def _llg_error(err: str) -> str:
    """The first error the sampler logged; the log thread may write it mid-line, or not at all
    when an assertion aborts the process first."""
    m = re.search(r"llg error: ([^\n]*)", err)
    return m[1].strip() if m else ""


def _string_tests(err: str) -> str:
    if "skipping the string tests" in err:
        return "skipped"
    ours = ("⚫ Testing that no allowed", "⚫ Testing that every allowed")
    ran = any(h.startswith("Testing ") and not ("⚫ " + h).startswith(ours) for h in err.split("⚫ ")[1:])
    return "ran" if ran else "not reached"


def program_env(overrides: Iterable[Override]) -> dict[str, str]:
    """The environment a compiled program runs in: this one, with exactly `overrides` for
    kv_override.cpp (an inherited setting never reaches a run that has none)."""
    base = {k: v for k, v in os.environ.items() if k != ENV}
    return {**base, **env(overrides)}


def check_taken(overrides: tuple[Override, ...], said: str, program: str, vocab_path: Path) -> None:
    """RuntimeError when a program's log does not show llama.cpp taking each override (a binary
    built before kv_override.cpp, or one llama.cpp refused), naming it."""
    if not overrides:
        return

    try:
        check_log(overrides, said, Path(vocab_path).name, vocab_only=True)  # every program here loads vocab_only
    except InputError as e:
        raise RuntimeError(f"{program}: {e} (a binary built without kv_override.cpp? make native)") from None


def _assertion(err: str) -> str:
    """The failed assertion, C's or ggml's, as one stable line (`file.cpp:N: Assertion ...`)."""
    for ln in reversed(err.splitlines()):
        if m := re.search(r"([\w.-]+\.cpp:\d+): .*?(Assertion .*)$", ln):
            return f"{m[1]}: {m[2]}"
        if "GGML_ASSERT" in ln:
            return tidy(ln[ln.find("GGML_") :] if ":" not in ln else ln)
    return ""


def run_test(
    test: str,
    sampler: str,
    vocab_path: Path,
    timeout: int = TEST_TIMEOUT,
    llg: str | None = None,
    overrides: tuple[Override, ...] = (),
) -> TestRun:
    """Run the `test`'s binary against `sampler` on one vocab file, linked against llguidance
    `llg` (None: the venv's), with llama.cpp's key `overrides` (through kv_override.cpp)."""
    exe = bin_dir(llg) / f"test-{test}-{sampler}"
    version = llg or venv_llguidance()
    try:
        # the test writes debug files into its working directory when a string fails
        r = subprocess.run(
            [str(exe), str(Path(vocab_path).resolve())],
            capture_output=True,
            timeout=timeout,
            cwd=tempfile.gettempdir(),
            env=program_env(overrides),
        )
    except subprocess.TimeoutExpired:
        return timed_out(test, sampler, timeout, version)
    code = r.returncode if r.returncode >= 0 else 128 - r.returncode
    err = r.stderr.decode("utf-8", "replace")
    check_taken(overrides, err, exe.name, vocab_path)
    return read_test(test, sampler, code, r.stdout.decode("utf-8", "replace"), err, version)


def timed_out(test: str, sampler: str, timeout: int, version: str) -> TestRun:
    return TestRun(test, sampler, 124, failure=f"timed out after {timeout} s", llguidance=version)


def read_test(test: str, sampler: str, code: int, out: str, err: str, version: str) -> TestRun:
    """One test's run, from its exit status (as a shell shows it) and what it wrote to stdout and
    stderr: from a binary of its own (`run_test`) or a harness's child (`trace.harness_each`)."""
    chain = _CHAIN.findall(err)
    counts = {m[0]: (int(m[1]), int(m[2])) for m in _COUNTS.findall(err)}
    space = counts.get("test_no_space_tokens", (None, None))
    forced = counts.get("test_forced_mask_bytes", (None, None))
    forced_part = err.split("test_no_space_tokens:", 1)[-1].split("test_forced_mask_bytes:", 1)[0]
    return TestRun(
        test=test,
        sampler=sampler,
        exit_code=code,
        space_allowed=space[0],
        space_bad=space[1],
        forced_allowed=forced[0],
        forced_bad=forced[1],
        forced_tokens=tuple(int(t) for t in _FORCED_TOKEN.findall(forced_part)) if forced[0] is not None else (),
        string_tests=_string_tests(err),
        failure="" if code == 0 else _failure(err, code, out),
        llg_error=_llg_error(err),
        llguidance=version,
        assertion=_assertion(err) if code else "",
        chain_token=int(chain[-1][0]) if chain else None,
        chain_selected=int(chain[-1][1]) if chain and chain[-1][1] else None,
    )


def parse_ranges(s: str) -> np.ndarray:
    if s == ".":
        return np.zeros(0, dtype=np.int64)
    parts = []
    for r in s.split(","):
        a, _, b = r.partition("-")
        parts.append(np.arange(int(a), int(b or a) + 1))
    return np.concatenate(parts)


def llg_errors(lines: list[str]) -> str:
    errs = [ln.removeprefix("llg error: ") for ln in lines if ln.startswith("llg error: ")]
    return errs[0] if errs else ""
