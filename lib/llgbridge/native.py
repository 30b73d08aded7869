"""The real C++ under review: built from the vendored tree, run on a vocab, and set against the port.

Everything else in this package drives llguidance through a Python port of
`common/llguidance.cpp`. This module runs the code the PR changes:

- `build()` extracts the vendored llama.cpp sources from the pinned llama-cpp-python sdist (the
  one `make data` fetches), copies them and applies `patches/` (the PR, guide 11) with
  `patch -p1 --fuzz=0`, then compiles with `native/Makefile`: `common/llguidance.cpp` as shipped
  and as patched, llama.cpp's own `tests/test-grammar-llguidance.cpp` as shipped and as patched,
  and `native/harness.cpp`. They link the venv's `libllama` and the llguidance wheel's C API.
  About 30 s on 2 cores the first time; nothing when up to date.
- `run_test()` runs one test binary on one vocab: its exit status as a shell shows it (134 for
  an abort), the counts the PR's two new tests print (guide 7.1, 7.2), and the first failing
  string test.
- `harness()` drives the compiled `llama_sampler_init_llg` through `native/harness.cpp`, which
  applies and accepts as `common/sampling.cpp` does and prints the allowed ids of every step;
  `port_trace()` walks the same job through the Python port (`bridges.Upstream` / `Fixed`).
- `differential()` compares the two cell by cell (a cell is one step of one job): the allowed
  set, and the llguidance error where the sampler drops its grammar.
- `analyse()` does all of it for one vocab: the result the `native` notebook shows.

The jobs of the differential: the leak grammar at position 0 (guide 4.4), the forced literal
followed step by step as `masks.forced_test` follows it (guide 5.1, 7.2), and every grammar of
the soundness battery along the walks `soundness` takes.

But:
- the sampler ignores a failed `llg_matcher_consume_token` (common/llguidance.cpp:39-44); the
  error shows at the next mask, where `llama_sampler_llg_apply` logs it and frees the matcher.
  The port's trace does the same, so both report the error at the same step;
- the fixed sampler's greedy fallback is seen from its log line ("not byte exact"), which
  llama.cpp prints once per vocab: the tokenizer is cached per vocab (:141-146);
- the native parts need a C++ compiler and `patch`; without them `build()` records one line
  saying so, and everything else runs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import first_line
from .paths import DATA, ROOT, write_atomic, write_json

NATIVE = DATA / "native"
SHIPPED = NATIVE / "src" / "shipped"
FIXED = NATIVE / "src" / "fixed"
BIN = NATIVE / "bin"
STATUS = NATIVE / "status.json"
PATCHES = ROOT / "patches"
MAKEFILE = ROOT / "native" / "Makefile"

SAMPLERS = ("upstream", "fixed")  # the shipped common/llguidance.cpp, and with the PR
# candidate patches beside the PR (patches/candidates/), each applied on top of it in a tree of its
# own and named for what it does: a sampler each, never replacing `fixed`
CANDIDATES: dict[str, str] = {
    "nospecial": "0004-llguidance-tokenize-fn-without-special-parsing.patch",
    "failclosed": "0005-llguidance-fail-closed-on-a-mask-error.patch",
}
CANDIDATE_PATCHES = PATCHES / "candidates"
# what the build needs from the vendored tree: common/ and the public headers for every object,
# nlohmann for common/json.h, and the two test files the PR touches
SOURCE_PREFIXES = ("common/", "include/", "ggml/include/", "vendor/nlohmann/", "tests/test-grammar-llguidance.cpp",
                   "tests/CMakeLists.txt",
                   # llama-server (`server.build`): its sources, the mtmd headers it includes (the venv has
                   # libmtmd), the UI's templates (no assets), cpp-httplib, the subprocess header and the staging API
                   # header common/fit.cpp and speculative.cpp include (libllama exports it)
                   "tools/server/", "tools/mtmd/mtmd.h", "tools/mtmd/mtmd-helper.h", "tools/ui/ui.h.in",
                   "tools/ui/ui.cpp.in", "vendor/cpp-httplib/", "vendor/sheredom/", "src/llama-ext.h")
COMMIT_MEMBER = "llama_cpp_python-0.3.36/.git/modules/vendor/llama.cpp/HEAD"
COMMIT_FILE = "LLAMA_CPP_COMMIT"
TEST_TIMEOUT = 600  # seconds for one test binary on one vocab; gemma-4 (262k tokens) takes about 20


# llguidance as llama.cpp links it (common/CMakeLists.txt: GIT_TAG d795912f..., "v1.0.1")
LLG_PINNED = "1.0.1"
LLG_WHEELS = {  # the wheel pip picks here, and its sha256 as the registry serves it
    "llguidance-1.0.1-cp39-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl":
        "945ab9c077d35dc8c6a603ea6a3e4f5ba2deeae80a0b3cbfbedd142881fb4262",
}
LLG_DIR = NATIVE / f"llguidance-{LLG_PINNED}"


# -- build -----------------------------------------------------------------------------------
def _extract_sources(dest: Path) -> None:
    """The vendored tree's build inputs, from the sdist `make data` caches, into `dest`."""
    from .fixtures import MEMBER_PREFIX, fetch_sdist

    sdist = fetch_sdist(DATA / "sdist")
    with tarfile.open(sdist) as tar:
        members = []
        for m in tar.getmembers():
            if not m.name.startswith(MEMBER_PREFIX) or not (m.isfile() or m.isdir()):
                continue
            rel = m.name[len(MEMBER_PREFIX):]
            if rel.startswith(SOURCE_PREFIXES):
                m.name = rel
                members.append(m)
        tar.extractall(dest, members=members, filter="data")
        # the sdist keeps the submodule's git dir: the commit of the vendored tree
        head = tar.extractfile(COMMIT_MEMBER) if COMMIT_MEMBER in tar.getnames() else None
        if head is not None:
            (dest / COMMIT_FILE).write_text(head.read().decode().strip() + "\n")


def vendored_commit() -> str:
    """The llama.cpp commit llama-cpp-python vendors (read from its sdist by `build`), or ""."""
    try:
        return (SHIPPED / COMMIT_FILE).read_text().strip()
    except OSError:
        return ""


def patch_files() -> list[Path]:
    """The PR as a series, in the order it applies."""
    return sorted(PATCHES.glob("*.patch"))


def candidate_tree(name: str) -> Path:
    return NATIVE / "src" / name


def apply_patches(tree: Path, dry_run: bool = False, patches: list[Path] | None = None) -> None:
    """Apply `patches/` (or `patches`) to `tree` with no fuzz: a patch that does not apply exactly raises."""
    if not shutil.which("patch"):
        raise RuntimeError("the `patch` program is missing (Debian package `patch`)")
    for p in patch_files() if patches is None else patches:
        cmd = ["patch", "-p1", "--fuzz=0", "--forward", "--batch", "--no-backup-if-mismatch", "-d", str(tree), "-i", str(p)]
        if dry_run:
            cmd.append("--dry-run")
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0 or "offset" in r.stdout:
            said = (r.stdout + r.stderr).strip().splitlines()
            raise RuntimeError(f"{p.relative_to(ROOT)} does not apply cleanly: {said[-1] if said else r.returncode}")


def venv_llguidance() -> str:
    from importlib.metadata import version

    return version("llguidance")


def fetch_pinned_llguidance() -> Path:
    """The 1.0.1 wheel's `_lib.abi3.so`, extracted into data/native/llguidance-1.0.1/ (once)."""
    lib = LLG_DIR / "_lib.abi3.so"
    if lib.exists():
        return lib
    LLG_DIR.mkdir(parents=True, exist_ok=True)
    import sys

    from .fixtures import sha256

    with tempfile.TemporaryDirectory(dir=LLG_DIR) as tmp:
        r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                            f"llguidance=={LLG_PINNED}", "-d", tmp, "-q", "--disable-pip-version-check"],
                           capture_output=True, text=True)
        wheels = sorted(Path(tmp).glob("*.whl"))
        if r.returncode != 0 or not wheels:
            said = [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith("WARNING")]
            raise RuntimeError(f"llguidance=={LLG_PINNED}: pip download failed: {said[-1] if said else r.returncode}")
        wheel = wheels[0]
        want = LLG_WHEELS.get(wheel.name)
        if want is None:
            raise RuntimeError(f"llguidance=={LLG_PINNED}: no pinned sha256 for {wheel.name} (this platform's wheel)")
        got = sha256(wheel)
        if got != want:
            raise RuntimeError(f"{wheel.name}: sha256 {got[:12]}… is not the pinned {want[:12]}…")
        with zipfile.ZipFile(wheel) as z:
            member = next((n for n in z.namelist() if n.startswith("llguidance/_lib") and n.endswith(".so")), None)
            if member is None:
                raise RuntimeError(f"{wheel.name} holds no llguidance/_lib*.so")
            write_atomic(lib, z.read(member))
    return lib


def llguidance_libraries() -> tuple[dict[str, Path], dict[str, str]]:
    """({version: the C API's shared library}, {version: why it is missing}): the pinned 1.0.1
    and the venv's."""
    from .llg import _library_path

    libs: dict[str, Path] = {venv_llguidance(): _library_path()}
    missing: dict[str, str] = {}
    try:
        libs[LLG_PINNED] = fetch_pinned_llguidance()
    except (RuntimeError, OSError, zipfile.BadZipFile, subprocess.SubprocessError) as e:
        missing[LLG_PINNED] = first_line(str(e))
    return dict(sorted(libs.items(), key=lambda kv: version_key(kv[0]))), missing


def version_key(v: object) -> tuple[int, ...]:
    """A version's sort key: `1.0.1` before `1.9.1` before `1.10.0`."""
    return tuple(int(x) if x.isdigit() else 0 for x in str(v).split("."))


def _python_link() -> tuple[str, str]:
    """(LIBDIR, library name for -l) of this interpreter's shared libpython."""
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    ldlib = sysconfig.get_config_var("LDLIBRARY") or ""
    if not ldlib.endswith(".so") or not (Path(libdir) / ldlib).exists():
        raise RuntimeError(f"this Python has no shared libpython ({ldlib or 'none'} in {libdir or '?'})")
    return libdir, ldlib.removeprefix("lib").removesuffix(".so")


def make_vars() -> dict[str, str]:
    import llama_cpp

    from .llg import _library_path

    py_libdir, py_lib = _python_link()
    return {
        "SHIPPED": str(SHIPPED),
        "FIXED": str(FIXED),
        "CANDIDATES": " ".join(CANDIDATES),
        **{f"SRC_{name}": str(candidate_tree(name)) for name in CANDIDATES},
        "OUT": str(NATIVE),
        "LLAMA_LIB": str(Path(llama_cpp.__file__).parent / "lib"),
        "LLG_SO": str(_library_path()),
        "PY_LIBDIR": py_libdir,
        "PY_LIB": py_lib,
    }


def prepare_sources() -> None:
    """Shipped and patched trees, rebuilt together whenever a patch is newer than them or the
    list of what is extracted changed (the stamp holds that list)."""
    stamp = NATIVE / "src" / ".complete"
    cands = [CANDIDATE_PATCHES / f for f in CANDIDATES.values()]
    newest = max((p.stat().st_mtime for p in [*patch_files(), *cands] if p.exists()), default=0.0)
    wanted = "\n".join([*SOURCE_PREFIXES, *CANDIDATES]) + "\n"
    try:
        same = stamp.read_text() == wanted and stamp.stat().st_mtime >= newest
    except OSError:
        same = False
    if same:
        return
    (NATIVE / "src").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=NATIVE / "src") as tmp:
        shipped, fixed = Path(tmp) / "shipped", Path(tmp) / "fixed"
        _extract_sources(shipped)
        shutil.copytree(shipped, fixed)
        apply_patches(fixed)
        staged_trees = [(SHIPPED, shipped), (FIXED, fixed)]
        for name, patch_name in CANDIDATES.items():
            tree = Path(tmp) / name
            shutil.copytree(fixed, tree)
            apply_patches(tree, patches=[CANDIDATE_PATCHES / patch_name])
            staged_trees.append((candidate_tree(name), tree))
        for final, staged in staged_trees:
            if final.exists():
                shutil.rmtree(final)
            os.replace(staged, final)
    stamp.write_text(wanted)


def check_compiler(what: str) -> str:
    """The C++ compiler (`CXX`, else c++); RuntimeError naming `what` is skipped when there is none."""
    cxx = os.environ.get("CXX", "c++")
    if not shutil.which(cxx):
        raise RuntimeError(f"no C++ compiler ({cxx} not found): {what} are skipped")
    return cxx


def run_make(makefile: Path, args: list[str], what: str, jobs: int | None = None) -> None:
    """`make -f makefile args`; RuntimeError with the first error line, naming `what`, when it fails."""
    r = subprocess.run(["make", "-s", "-f", str(makefile), f"-j{jobs or os.cpu_count() or 1}", *args], capture_output=True, text=True)
    if r.returncode != 0:
        errs = [ln for ln in r.stderr.splitlines() if "error" in ln.lower()] or r.stderr.strip().splitlines()
        raise RuntimeError(f"{what} failed: {errs[0] if errs else 'make exited ' + str(r.returncode)}")


def build(jobs: int | None = None) -> dict[str, Any]:
    """Build everything into data/native/; returns (and writes to status.json) what happened.

    A machine without a C++ compiler, `patch` or a shared libpython gets `{"built": false,
    "reason": ...}`: one line, and the rest of the suite runs without the native parts.
    """
    t0 = time.monotonic()
    status: dict[str, Any] = {"built": False}
    try:
        check_compiler("the native parts")
        prepare_sources()
        libs, missing = llguidance_libraries()
        # once per llguidance: the venv's (what the port drives) into bin/, the pinned one into
        # llg-VERSION/bin/ (each its own objects: a few seconds)
        for version, lib in libs.items():
            out = NATIVE if version == venv_llguidance() else NATIVE / f"llg-{version}"
            args = [f"{k}={v}" for k, v in {**make_vars(), "OUT": str(out), "LLG_SO": str(lib)}.items()]
            run_make(MAKEFILE, args, f"native build (llguidance {version})", jobs)
        status = {"built": True, "llguidance": list(libs), "missing": missing}
    except (RuntimeError, OSError, tarfile.TarError, subprocess.SubprocessError) as e:
        status["reason"] = first_line(str(e))
        # binaries of an earlier build are not what this tree builds now: gone, so every native
        # result that ran them is stale (their sha256 is its code version) and fails with the reason
        for d in [BIN, *NATIVE.glob("llg-*/bin")]:
            shutil.rmtree(d, ignore_errors=True)
    status["seconds"] = round(time.monotonic() - t0, 1)
    write_json(STATUS, status)
    return status


def unavailable() -> str | None:
    """None when the native build is there, else the one-line reason it is not."""
    try:
        status = json.loads(STATUS.read_text())
    except (OSError, ValueError):
        return "the native parts are not built (make native)"
    if not status.get("built"):
        return str(status.get("reason") or "the native build failed")
    missing = [b for b in binaries() if not b.exists()]
    return f"{missing[0].relative_to(ROOT)} is missing (make native)" if missing else None


def bin_dir(llg: str | None = None) -> Path:
    """Where the binaries linked against llguidance `llg` are (None: the venv's)."""
    return BIN if llg in (None, venv_llguidance()) else NATIVE / f"llg-{llg}" / "bin"


def built_versions() -> list[str]:
    """The llguidance versions the native binaries were built against, pinned (1.0.1) first."""
    try:
        status = json.loads(STATUS.read_text())
    except (OSError, ValueError):
        return []
    return [v for v in status.get("llguidance") or [venv_llguidance()] if all(b.exists() for b in binaries(v))]


def binaries(llg: str | None = None) -> list[Path]:
    names = [f"{kind}-{s}" for kind in ("test-shipped", "test-pr", "harness") for s in SAMPLERS]
    return [bin_dir(llg) / n for n in names]


# -- llama.cpp's own test --------------------------------------------------------------------
_COUNTS = re.compile(r"^(test_no_space_tokens|test_forced_mask_bytes): allowed=(\d+) bad=(\d+)$", re.M)
_FORCED_TOKEN = re.compile(r"^    (?:✅︎|❌) (\d+) '", re.M)


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

    @property
    def passed(self) -> bool:
        return self.exit_code == 0


def _failure(err: str) -> str:
    """The first failing string test, with the test it belongs to, or the failed assertion.

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


def run_test(test: str, sampler: str, vocab_path: Path, timeout: int = TEST_TIMEOUT, llg: str | None = None) -> TestRun:
    """Run the `test`'s binary against `sampler` on one vocab file, linked against llguidance
    `llg` (None: the venv's)."""
    exe = bin_dir(llg) / f"test-{test}-{sampler}"
    version = llg or venv_llguidance()
    try:
        # the test writes debug files into its working directory when a string fails
        r = subprocess.run([str(exe), str(Path(vocab_path).resolve())], capture_output=True, timeout=timeout,
                           cwd=tempfile.gettempdir())
    except subprocess.TimeoutExpired:
        return TestRun(test, sampler, 124, failure=f"timed out after {timeout} s", llguidance=version)
    code = r.returncode if r.returncode >= 0 else 128 - r.returncode
    err = r.stderr.decode("utf-8", "replace")
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
        failure="" if code == 0 else _failure(err),
        llg_error=_llg_error(err),
        llguidance=version,
    )


# -- the harness and the port ----------------------------------------------------------------
@dataclass(frozen=True)
class Job:
    """One walk: a grammar, and the tokens to accept (None: follow the lowest allowed id)."""

    id: str
    grammar: str
    tokens: tuple[int, ...] | None
    max_steps: int = 64

    def line(self) -> str:
        toks = "follow" if self.tokens is None else (",".join(map(str, self.tokens)) or ".")
        return f"job {self.id} {self.max_steps} {self.grammar.encode().hex()} {toks}\n"


@dataclass
class Trace:
    """What a sampler allowed along one job. `error` is where it dropped its grammar."""

    allowed: list[np.ndarray] = field(default_factory=list)  # sorted ids, per step
    tokens: list[int] = field(default_factory=list)  # the token accepted after each step (-1: none)
    error: str = ""
    error_step: int | None = None  # the step whose mask failed; None: before any step (grammar rejected)
    log: list[str] = field(default_factory=list)  # the sampler's log while it was built
    apply_ns: list[int] = field(default_factory=list)


def _parse_ranges(s: str) -> np.ndarray:
    if s == ".":
        return np.zeros(0, dtype=np.int64)
    parts = []
    for r in s.split(","):
        a, _, b = r.partition("-")
        parts.append(np.arange(int(a), int(b or a) + 1))
    return np.concatenate(parts)


def _llg_errors(lines: list[str]) -> str:
    errs = [ln.removeprefix("llg error: ") for ln in lines if ln.startswith("llg error: ")]
    return errs[0] if errs else ""


def harness(sampler: str, vocab_path: Path, jobs: list[Job], timeout: int = TEST_TIMEOUT, llg: str | None = None) -> dict[str, Trace]:
    """Run `jobs` through the compiled sampler (linked against llguidance `llg`, None: the
    venv's); traces by job id.

    Raises RuntimeError with the harness's last words when it does not finish (an abort inside
    llama.cpp, for instance).
    """
    exe = bin_dir(llg) / f"harness-{sampler}"
    r = subprocess.run(
        [str(exe), str(vocab_path)],
        input="".join(j.line() for j in jobs).encode(),
        capture_output=True,
        timeout=timeout,
    )
    out = r.stdout.decode("utf-8", "replace").splitlines()
    traces: dict[str, Trace] = {}
    pending: list[str] = []
    cur: Trace | None = None
    for ln in out:
        if not ln.startswith("@"):
            if ln.strip():
                pending.append(ln.rstrip())
            continue
        word, *rest = ln.split(" ", 6)
        if word == "@job":
            cur = traces[rest[0]] = Trace()
        elif word == "@ready" and cur is not None:
            cur.log = pending
            cur.error = _llg_errors(pending)
        elif word == "@step" and cur is not None:
            _, i, _n, tok, ns, rng = rest
            if not cur.error and (e := _llg_errors(pending)):
                cur.error, cur.error_step = e, int(i)
            cur.allowed.append(_parse_ranges(rng))
            cur.tokens.append(int(tok))
            cur.apply_ns.append(int(ns))
        elif word == "@error":
            raise RuntimeError(f"harness-{sampler}: {' '.join(rest)}")
        if word != "@vocab":
            pending = []
    if r.returncode != 0 or len(traces) != len(jobs):
        code = r.returncode if r.returncode >= 0 else 128 - r.returncode
        last = [ln for ln in out if ln.strip() and not ln.startswith("@")]
        raise RuntimeError(f"harness-{sampler} exited {code}: {last[-1] if last else 'no output'}")
    return traces


def port_trace(bridge: Any, job: Job) -> Trace:
    """The same job through the Python port, with the sampler's policy (see the module's But:)."""
    from .errors import InputError, LlgError
    from .llg import mask_bits

    v = bridge.vocab
    stops = {v.eos, v.eot}
    t = Trace()
    try:
        m = bridge.new_matcher(job.grammar)
    except InputError as e:
        t.error = e.cause.removeprefix("llguidance rejected it: ")
        return t
    for i in range(10**6):
        try:
            allowed = np.flatnonzero(mask_bits(m.mask(), v.n_tokens))
        except LlgError as e:
            t.error, t.error_step = str(e), i
            t.allowed.append(np.arange(v.n_tokens))  # the sampler then lets everything through
            t.tokens.append(-1)
            return t
        nxt = -1
        if job.tokens is None:
            if i < job.max_steps and len(allowed) < v.n_tokens:
                nxt = next((int(a) for a in allowed if int(a) not in stops), -1)
        elif i < len(job.tokens):
            nxt = job.tokens[i]
        t.allowed.append(allowed)
        t.tokens.append(nxt)
        if nxt < 0:
            return t
        try:
            m.consume(nxt)
        except LlgError:
            pass  # as the sampler: the next mask reports it
    return t


# -- the differential ------------------------------------------------------------------------
N_EXAMPLES = 8


@dataclass(frozen=True)
class Difference:
    """One cell where the compiled sampler and the port disagree."""

    vocab: str
    sampler: str
    job: str
    step: int | None
    what: str  # "allowed", "error", "steps" or "greedy"
    only_cpp: tuple[int, ...] = ()  # up to N_EXAMPLES ids the C++ allows and the port does not
    only_port: tuple[int, ...] = ()
    n_only_cpp: int = 0
    n_only_port: int = 0
    cpp: str = ""  # for an error or a count: what each side said
    port: str = ""


@dataclass
class Differential:
    vocab: str
    sampler: str
    llguidance: str = ""  # what the compiled side linked; the port drives the venv's
    jobs: int = 0
    cells: int = 0
    differences: list[Difference] = field(default_factory=list)
    greedy_cpp: bool | None = None
    greedy_port: bool | None = None


def compare(vocab: str, sampler: str, job: Job, cpp: Trace, port: Trace, d: Differential) -> None:
    """Add one job's cells to `d`: each step up to the first error, then the error itself."""
    d.jobs += 1
    end_c = len(cpp.allowed) if cpp.error_step is None else cpp.error_step
    end_p = len(port.allowed) if port.error_step is None else port.error_step
    if cpp.error and cpp.error_step is None:
        end_c = 0
    if port.error and port.error_step is None:
        end_p = 0
    for i in range(min(end_c, end_p)):
        d.cells += 1
        a, b = cpp.allowed[i], port.allowed[i]
        if len(a) == len(b) and np.array_equal(a, b):
            continue
        oc, op = np.setdiff1d(a, b), np.setdiff1d(b, a)
        d.differences.append(Difference(vocab, sampler, job.id, i, "allowed", tuple(int(x) for x in oc[:N_EXAMPLES]),
                                        tuple(int(x) for x in op[:N_EXAMPLES]), len(oc), len(op)))
    d.cells += 1  # where and how the walk ended
    if end_c != end_p or first_line(cpp.error) != first_line(port.error):
        d.differences.append(Difference(vocab, sampler, job.id, min(end_c, end_p), "error" if cpp.error or port.error else "steps",
                                        cpp=f"step {cpp.error_step}: {first_line(cpp.error)}" if cpp.error else f"{end_c} steps",
                                        port=f"step {port.error_step}: {first_line(port.error)}" if port.error else f"{end_p} steps"))


def jobs_for(truth: Any, literal: str, leak_grammar: str, walks: int = 2, seed: int = 0, max_steps: int = 64) -> list[Job]:
    """The differential's jobs for one vocab (see the module docstring)."""
    from . import soundness
    from .grammars import literal_grammar

    jobs = [Job("leak", leak_grammar, ()), Job("forced", literal_grammar(literal), None, max_steps)]
    for name, grammar, k, sample in soundness.walk_list(truth, walks=walks, seed=seed):
        tokens = truth.tokenize(sample.encode())
        if truth.vocab.real_bytes(tokens) != sample.encode():
            continue  # soundness skips what the vocab cannot spell, and so does this
        jobs.append(Job(f"{name}.{k}", grammar, tuple(tokens)))
    return jobs


def differential(bridge: Any, jobs: list[Job], traces: dict[str, Trace], llg: str = "") -> Differential:
    d = Differential(bridge.vocab.name, bridge.name, llg or venv_llguidance())
    for job in jobs:
        compare(bridge.vocab.name, bridge.name, job, traces[job.id], port_trace(bridge, job), d)
    # the fixed sampler says "not byte exact" once per vocab, when the first job builds its tokenizer
    d.greedy_cpp = any("not byte exact" in ln for ln in traces[jobs[0].id].log) if jobs else None
    d.greedy_port = bool(bridge.greedy)
    d.cells += 1
    if d.greedy_cpp != d.greedy_port:
        d.differences.append(Difference(d.vocab, d.sampler, jobs[0].id if jobs else "", None, "greedy",
                                        cpp=str(d.greedy_cpp), port=str(d.greedy_port)))
    return d


# -- one vocab, all of it --------------------------------------------------------------------
@dataclass
class NativeResult:
    """The native analysis of one vocab: the tests and the differential, per sampler."""

    vocab: str
    tok_eos: int  # llama.cpp's choice for llguidance: EOT, else EOS (common/llguidance.cpp:148-151)
    tests: list[TestRun]
    diffs: list[Differential]
    harness_errors: dict[str, str] = field(default_factory=dict)  # "SAMPLER" or "SAMPLER llguidance V" -> why the harness did not finish
    versions: list[str] = field(default_factory=list)  # the llguidance versions run, pinned (1.0.1) first
    special: list[dict[str, Any]] = field(default_factory=list)  # bug C through each compiled sampler (special_literal_rows)

    def test(self, test: str, sampler: str, llg: str = "") -> TestRun | None:
        llg = llg or venv_llguidance()
        return next((t for t in self.tests if t.test == test and t.sampler == sampler and t.llguidance in (llg, "")), None)

    def rows(self) -> list[dict[str, Any]]:
        """native.csv: one row per (vocab, sampler, llguidance), llama.cpp's pin first. The
        differential compares each with the port, which drives the venv's llguidance: on the
        venv's version a difference is the port's, on another it is the version's."""
        out = []
        for llg in self.versions or [venv_llguidance()]:
            for s in SAMPLERS:
                pr, shipped = self.test("pr", s, llg), self.test("shipped", s, llg)
                d = next((x for x in self.diffs if x.sampler == s and x.llguidance == llg), None)
                key = s if llg == venv_llguidance() else f"{s} llguidance {llg}"
                out.append({
                    "vocab": self.vocab,
                    "sampler": s,
                    "llguidance": llg,
                    "tok_eos": self.tok_eos,
                    "pr_test_exit": pr.exit_code if pr else "",
                    "no_space_allowed": _blank(pr.space_allowed if pr else None),
                    "no_space_bad": _blank(pr.space_bad if pr else None),
                    "forced_allowed": _blank(pr.forced_allowed if pr else None),
                    "forced_bad": _blank(pr.forced_bad if pr else None),
                    "string_tests": pr.string_tests if pr else "",
                    "pr_test_failure": pr.failure if pr else "",
                    "pr_test_llg_error": pr.llg_error if pr else "",
                    "shipped_test_exit": shipped.exit_code if shipped else "",
                    "shipped_test_failure": shipped.failure if shipped else "",
                    "shipped_test_llg_error": shipped.llg_error if shipped else "",
                    "greedy": "" if d is None or d.greedy_cpp is None else d.greedy_cpp,
                    "diff_jobs": d.jobs if d else "",
                    "diff_cells": d.cells if d else "",
                    "diff_differ": len(d.differences) if d else "",
                    "harness_error": self.harness_errors.get(key, ""),
                })
        return out

    def difference_rows(self, vocab: Any = None) -> list[dict[str, Any]]:
        """Every difference, with the real bytes of its example tokens when `vocab` is given."""
        def pieces(ids: tuple[int, ...]) -> str:
            if vocab is None:
                return ""
            return json.dumps([vocab.token_to_piece(t).decode("utf-8", "backslashreplace") for t in ids], ensure_ascii=False)

        return [{**asdict(x), "llguidance": d.llguidance, "only_cpp": " ".join(map(str, x.only_cpp)), "only_port": " ".join(map(str, x.only_port)),
                 "only_cpp_pieces": pieces(x.only_cpp), "only_port_pieces": pieces(x.only_port)}
                for d in self.diffs for x in d.differences]

    def payload(self, vocab: Any = None) -> dict[str, Any]:
        return {
            "rows": self.rows(),
            "differences": self.difference_rows(vocab),
            "tests": [asdict(t) for t in self.tests],
            "special": self.special,
        }


def _blank(x: int | None) -> int | str:
    return "" if x is None else x


def analyse(vocab: Any, literal: str, leak_grammar: str, walks: int = 2, seed: int = 0,
            build: Any = None) -> NativeResult:
    """Both test binaries against both samplers, and the differential, for one loaded `Vocab`.

    `build(vocab, name)` makes a bridge (default `bridges.build`; a notebook passes its cache).
    """
    from . import bridges

    build = build or bridges.build
    why = unavailable()
    if why:
        raise RuntimeError(why)
    versions = built_versions() or [venv_llguidance()]
    tests = [run_test(t, s, vocab.path, llg=v) for v in versions for t in ("shipped", "pr") for s in SAMPLERS]
    truth = build(vocab, "truth")
    jobs = jobs_for(truth, literal, leak_grammar, walks, seed)
    diffs, errors = [], {}
    for v in versions:
        for s in SAMPLERS:
            key = s if v == venv_llguidance() else f"{s} llguidance {v}"
            try:
                traces = harness(s, vocab.path, jobs, llg=v)
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                errors[key] = first_line(str(e))
                continue
            diffs.append(differential(build(vocab, s), jobs, traces, v))
    pin = LLG_PINNED if LLG_PINNED in versions else versions[0]
    cands = [c for c in CANDIDATES if (bin_dir(pin) / f"test-pr-{c}").exists()]
    tests += [run_test("pr", c, vocab.path, llg=pin) for c in cands]
    special = special_literal_rows(vocab, [*SAMPLERS, *cands], pin)
    return NativeResult(vocab.name, bridges._tok_eos(vocab), tests, diffs, errors, versions, special)


def special_text(vocab: Any) -> str:
    """The text of the vocab's end-of-turn token (EOT, else EOS), as `token_to_piece(special=true)`
    spells it, or "" when it has none or its text is not plain UTF-8."""
    for t in (vocab.eot, vocab.eos):
        if t >= 0:
            try:
                text = vocab.token_to_piece(t, special=True).decode("utf-8")
            except UnicodeDecodeError:
                continue
            if text.strip() and text.isprintable():
                return text
    return ""


def special_literal_rows(vocab: Any, samplers: list[str], llg: str) -> list[dict[str, Any]]:
    """Bug C through the compiled samplers: a literal spelling the vocab's end-of-turn token as
    text (`say TEXT now`), followed step by step; where the walk stops, what each sampler allows
    there, by id and real bytes. A sampler that parses the text into the control token allows
    only that token (a decoder ends the turn), one that spells it out allows the text's first piece."""
    from .grammars import literal_grammar

    text = special_text(vocab)
    if not text:
        return []
    literal = f"say {text} now"
    job = Job("special", literal_grammar(literal), None, 64)
    out = []
    for s in samplers:
        try:
            t = harness(s, vocab.path, [job], llg=llg)["special"]
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            out.append({"vocab": vocab.name, "sampler": s, "llguidance": llg, "literal": literal, "error": first_line(str(e))})
            continue
        consumed = [x for x in t.tokens if x >= 0]
        last = t.allowed[-1] if t.allowed else np.array([], dtype=np.int64)
        spelled = vocab.real_bytes(consumed)
        out.append({
            "vocab": vocab.name, "sampler": s, "llguidance": llg, "literal": literal, "steps": len(t.allowed),
            "spelled": spelled.decode("utf-8", "backslashreplace"),
            "complete": spelled == literal.encode(),
            "stop_allowed": " ".join(str(int(x)) for x in last[:8]), "n_stop_allowed": int(len(last)),
            "stop_allowed_pieces": json.dumps([vocab.token_to_piece(int(x), special=True).decode("utf-8", "backslashreplace")
                                               for x in last[:8]], ensure_ascii=False),
            "error": first_line(t.error),
        })
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] != ["build"]:
        print("usage: python -m llgbridge.native build", file=sys.stderr)
        return 2
    print("[native] building common/llguidance.cpp (shipped and with patches/), test-grammar-llguidance, harness ...", flush=True)
    st = build()
    if st["built"]:
        print(f"[native] built in {st['seconds']} s: {', '.join(b.name for b in binaries())}", flush=True)
    else:
        print(f"[native] not built: {st['reason']}", file=sys.stderr, flush=True)
    return 0  # the report goes on without the native parts, and says why


if __name__ == "__main__":
    raise SystemExit(main())
