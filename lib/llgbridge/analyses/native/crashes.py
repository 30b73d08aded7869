"""Why a native program died, in one line that is the same on every run of the same failure:
read from the output of llama.cpp's tests, the harness, a kernel or an engine's process.

Standard library only: the runner and the engines' analyses read it without the native
analysis's build helpers.
"""

from __future__ import annotations

import re

# ggml's abort handler runs gdb, whose chatter ends the output ("[Inferior 1 (process 6572)
# detached]"): none of it says why, and its ids differ from run to run
_NOISE = re.compile(
    r"^(?:#\d|\[|\(gdb\)|0x[0-9a-f]|Using host libthread_db|warning: |stack backtrace:|note: |\s+at |\s*\d+: 0x|@)"
)
_OOM = re.compile(
    r"std::bad_alloc|memory allocation of \d+ bytes failed|Cannot allocate memory|out of memory|failed to "
    r"allocate|MemoryError",
    re.I,
)
_SIGNALS = {
    134: "abort (SIGABRT)",
    135: "bus error (SIGBUS)",
    136: "floating-point exception (SIGFPE)",
    137: "killed (SIGKILL: out of memory, or a time limit)",
    139: "segmentation fault (SIGSEGV)",
}


def tidy(line: str) -> str:
    """One line with what differs between runs and machines taken out: directories (a build
    machine's `/tmp/pip-install-…/vendor/llama.cpp/src/`), process and thread ids, addresses."""
    line = re.sub(r"(?<![^\s'\"(=])(?:/[^\s:/'\"]+)+/([^\s:/'\"]+)", r"\1", line.strip())  # absolute paths only
    line = re.sub(r"\b(process|pid|thread|LWP) \d+", r"\1 N", line)
    line = re.sub(r"0x[0-9a-fA-F]{4,}", "0x…", line)
    return line[:300]


_CRASH_KEYS = (
    "GGML_ASSERT",
    "GGML_ABORT",
    "terminate called",
    "what():",
    "Assertion",
    "panicked at",
    "Segmentation fault",
)


def says_crash(text: str) -> bool:
    """Whether a process's output holds a line that tells why native code died (for a kernel's
    log, which holds much else: with none, the cause is not this output's to tell)."""
    return any(k in text for k in _CRASH_KEYS) or bool(_OOM.search(text))


def crash_cause(text: str, code: int | None = None) -> str:
    """Why a native program died, in one line that is the same on every run of the same failure.

    In order: an out-of-memory (C++ `std::bad_alloc`, Rust's `memory allocation of N bytes
    failed`, a failed allocation under `ulimit -v`) is named as such; else llama.cpp's
    `GGML_ASSERT`/`GGML_ABORT` line, a C `Assertion … failed`, an uncaught C++ exception as
    `uncaught TYPE: what()` (the runtime writes its type and its `what():` on two lines), a Rust
    panic with its message; else the signal the exit status names; else the last line that is not
    a debugger's. `code` is the exit status as a shell shows it (128 + signal)."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    said = [ln for ln in lines if not _NOISE.match(ln)]
    if oom := next((ln for ln in said if _OOM.search(ln)), None):
        return f"out of memory: {tidy(oom)}"
    if ggml := next((ln for ln in said if "GGML_ASSERT" in ln or "GGML_ABORT" in ln), None):
        return tidy(ggml[ggml.find("GGML_") :] if ":" not in ggml else ggml)
    if c_assert := next((ln for ln in said if re.search(r"Assertion .* failed", ln)), None):
        return tidy(re.sub(r"^[^:]*: ", "", c_assert, count=1) if c_assert.count(": ") > 1 else c_assert)
    text = "\n".join(said)
    if m := re.search(r"terminate called after throwing an instance of '([^'\n]*)'?", text):
        what = re.search(r"what\(\):\s*([^\n]*)", text[m.end() :])
        return tidy(f"uncaught {m[1] or 'exception'}" + (f": {what[1]}" if what and what[1] else ""))
    if m := re.search(r"panicked at ([^\n]*?):?\n([^\n]*)", text + "\n"):
        return tidy(f"llguidance panicked at {m[1]}: {m[2]}")
    if code in _SIGNALS:
        return _SIGNALS[code]
    if said:
        return tidy(said[-1])
    return f"exited {code}" if code is not None else "no output"
