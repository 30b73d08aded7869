"""llama-server, the product a user runs: built shipped and patched, started on loopback, asked over HTTP.

The rest of the suite drives the bridge through a Python port (`bridges`) or through a harness
around the compiled sampler (`native`). Users meet the bugs through `llama-server`: a request
whose `grammar` starts with `%llguidance` or that carries a `json_schema`
(`common/json-schema-to-grammar.cpp` turns it into `%llguidance {}\\nstart: %json ...`) reaches
`llama_sampler_init_llg` through `common/sampling.cpp`. This module builds that server and runs it.

- `build_servers()` compiles `native/server.mk` from the vendored tree that `native` extracts: common/
  (libllama-common), tools/server/ and cpp-httplib, linked against the venv's libllama, libggml
  and libmtmd (the same vendored commit), so ggml and libllama are not compiled again. Four
  binaries: `llama-server-SAMPLER-LLG` for SAMPLER `upstream` (the shipped
  `common/llguidance.cpp`) or `fixed` (with `patches/`), and LLG the llguidance it links: 1.0.1,
  what llama.cpp pins (`common/CMakeLists.txt`, `GIT_TAG` "v1.0.1"), from its wheel fetched with
  `pip download --no-deps` and checked by sha256 (never installed), or the venv's (what the port
  drives). About 5 minutes on 2 cores the first time; nothing when up to date.
- `serve()` starts one binary on one model at 127.0.0.1 on a port it binds itself and names in
  its log, in its own process group, reads its log through a pipe (`ServerLog`), waits for
  `/health` within a bounded time, checks that the server answering is the one started, and stops
  the group on every way out (including the parent's death: the child has `PR_SET_PDEATHSIG`).
- `post()` is a client's request: the HTTP status and the body, with a bounded timeout.

But:
- the UI is not embedded (`LLAMA_BUILD_UI` is off by default upstream too): `ui.h`/`ui.cpp` are
  generated from `tools/ui/*.in` as `scripts/ui-assets.cmake` writes them when there are no assets;
- `build-info.cpp` is generated from its template with build number 0 and the vendored commit;
- the server is started with `--no-repack` (`use_extra_bufts = false`), for the reason
  `generate` loads models that way: quantized models die in ggml's AMX kernels on this CPU;
- llguidance 1.0.1's `LlgParserLimits` has no `verbose_errors`; `native/llg_layout.cpp` proves at
  compile time that the structures `common/llguidance.cpp` passes have the same size and offsets
  in both headers, so one object serves both libraries.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import first_line
from ...overrides import Override
from ...paths import DATA, ROOT, write_atomic, write_json
from ..native import builder as native_builder
from ..native.builder import LLG_PINNED, PATCH_OF, SAMPLERS, llguidance_libraries, venv_llguidance

SERVER = DATA / "native" / "server"
SERVER_BIN = SERVER / "bin"
SERVER_STATUS = SERVER / "status.json"
SERVER_MAKEFILE = ROOT / "native" / "server.mk"
LAYOUT_CHECK = ROOT / "native" / "llg_layout.cpp"
CANDIDATE_BUILDS = tuple(PATCH_OF)  # patches beside the PR (patches/candidates/), built too
GBNF_TOOL = SERVER_BIN / "schema-to-gbnf"

STARTUP_TIMEOUT = 120.0  # seconds for /health to answer 200 (a 262k-vocab model loads in a few)
# a server's address space beyond its model file (mapped whole): Gemma 3 270M's server peaks at
# 0.56 GiB in all; a chat template that doubles a string once grew every server to the machine's limit
MEMORY_HEADROOM = 4 << 30
REQUEST_TIMEOUT = 120.0  # seconds for one completion


# -- build -----------------------------------------------------------------------------------
def _generate(shipped: Path, gen: Path, commit: str) -> None:
    """ui.h, ui.cpp (no assets) and build-info.cpp, as CMake's configure_file would write them."""
    gen.mkdir(parents=True, exist_ok=True)
    ui = shipped / "tools" / "ui"
    h = (ui / "ui.h.in").read_text().replace("#cmakedefine LLAMA_UI_HAS_ASSETS 1", "/* #undef LLAMA_UI_HAS_ASSETS */")
    cpp = (ui / "ui.cpp.in").read_text()
    for k, v in {"N_ASSETS": "0", "ASSET_ARRAYS": "", "ASSET_TABLE": "", "USE_GZIP": "false"}.items():
        h, cpp = h.replace(f"@{k}@", v), cpp.replace(f"@{k}@", v)
    info = (shipped / "common" / "build-info.cpp.in").read_text()
    for k, v in {
        "LLAMA_BUILD_NUMBER": "0",
        "LLAMA_BUILD_COMMIT": commit[:8] or "unknown",
        "BUILD_COMPILER": "c++",
        "BUILD_TARGET": os.uname().machine,
    }.items():
        info = info.replace(f"@{k}@", v)
    for name, text in (("ui.h", h), ("ui.cpp", cpp), ("build-info.cpp", info)):
        p = gen / name
        if not p.exists() or p.read_text() != text:  # unchanged text keeps its mtime: no rebuild
            write_atomic(p, text)


def _check_layout(cxx: str, versions: list[str]) -> None:
    """Compile native/llg_layout.cpp: it fails to compile if the structures differ in layout."""
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run(
            [cxx, "-std=c++17", "-fsyntax-only", "-I", str(ROOT / "native"), str(LAYOUT_CHECK)],
            capture_output=True,
            text=True,
            cwd=tmp,
        )
    if r.returncode != 0:
        errs = [ln for ln in r.stderr.splitlines() if "error" in ln]
        raise RuntimeError(
            f"llguidance {' and '.join(versions)} disagree on a structure's layout: {errs[0] if errs else r.returncode}"
        )


def binary(sampler: str, llg: str) -> Path:
    return SERVER_BIN / f"llama-server-{sampler}-{llg}"


def _make_vars(libs: dict[str, Path]) -> dict[str, str]:
    """server.mk's variables: native/Makefile's (the trees, libllama, libpython) and, for each
    llguidance version V, LLG_DIR_V, LLG_LIB_V and LLG_RPATH_V."""
    shared = {
        k: v for k, v in native_builder.make_vars(SERVER, next(iter(libs.values()))).items() if not k.startswith("LLG_")
    }
    each: dict[str, str] = {}
    for v, so in libs.items():
        found = native_builder.library_vars("LLG", so.parent, SERVER_BIN)
        each |= {f"LLG_DIR_{v}": found["LLG_DIR"], f"LLG_RPATH_{v}": found["LLG_RPATH"], f"LLG_LIB_{v}": so.name}
    return {**shared, "GEN": native_builder.make_name(SERVER / "gen"), "LLG_VERSIONS": " ".join(libs), **each}


def build_servers(jobs: int | None = None) -> dict[str, Any]:
    """Build the servers into data/native/server/; returns (and writes to its status.json) what
    happened: `built`, the `llguidance` versions built against, `missing` (a version that could not
    be had, and why), `reason` when nothing was built, `seconds`."""
    t0 = time.monotonic()
    status: dict[str, Any] = {"built": False}
    try:
        cxx = native_builder.check_compiler("the server parts")
        native_builder.prepare_sources()
        libs, missing = llguidance_libraries()
        status["missing"] = missing
        _check_layout(cxx, list(libs))
        _generate(native_builder.SHIPPED, SERVER / "gen", native_builder.vendored_commit())
        native_builder.run_make(SERVER_MAKEFILE, _make_vars(libs), "server build", jobs)
        status.update(built=True, llguidance=list(libs))
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        status["reason"] = first_line(str(e))
        shutil.rmtree(SERVER_BIN, ignore_errors=True)  # as build_native does: no result may stand on an old binary
    status["seconds"] = round(time.monotonic() - t0, 1)
    write_json(SERVER_STATUS, status)
    return status


def builds() -> list[Path]:
    """Every binary the last build made (from its status), the schema converter last."""
    try:
        status = json.loads(SERVER_STATUS.read_text())
    except (OSError, ValueError):
        return []
    return (
        [*(binary(s, v) for v in status.get("llguidance", []) for s in (*SAMPLERS, *CANDIDATE_BUILDS)), GBNF_TOOL]
        if status.get("built")
        else []
    )


def built() -> tuple[dict[str, Any], str]:
    """(status, "") when the servers are there, else (status, the one-line reason they are not)."""
    try:
        status = json.loads(SERVER_STATUS.read_text())
    except (OSError, ValueError):
        return {}, "the servers are not built (make server)"
    if not status.get("built"):
        return status, str(status.get("reason") or "the server build failed")
    gone = [b for b in builds() if not b.exists()]
    return status, f"{gone[0].relative_to(ROOT)} is missing (make server)" if gone else ""


# -- one running server ----------------------------------------------------------------------
class ServerError(Exception):
    """The server could not be started or stopped answering; the message ends with its log's last lines."""


class NotStarted(ServerError):
    """The server never answered as the one started: it could not be run, exited while loading (a
    chat template it cannot render, issue 48 break 4), did not answer `/health` in time, or was not
    ours. No request reached it, so nothing of the build was measured."""


class ServerLog:
    """A server's stdout and stderr, read through a pipe: kept here for the rows that read it (its
    `llg error` lines, the greedy warning, the listening line) and copied to its log file.

    The server once wrote its log file itself: on a full disk its writes failed without a word, and
    rows fed by the log changed (upstream's `llg_errors` 1 -> 0, fixed's `greedy` True -> False)
    while the run said ok. Here a copy that cannot be written is known: `text` then raises
    ServerError naming the file, so those rows fail in one line instead."""

    def __init__(self, stream: Any, path: Path) -> None:
        self.path = path
        self._buf = bytearray()
        self._lock = threading.Lock()
        self.unwritten = ""  # why the copy could not be written, once it could not
        try:
            self._file: Any = path.open("wb")
        except OSError as e:
            self._file, self.unwritten = None, f"{path}: {e.strerror or e}"
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: Any) -> None:
        # each chunk is copied to the file before it is kept, and whether the copy failed is set
        # under the lock that keeps it: a row that reads a line then knows whether that line reached
        # the file (kept first, a reader between the two steps saw the line and no failure yet)
        fd = stream.fileno()
        while chunk := os.read(fd, 1 << 16):
            why = self._copy(chunk)
            with self._lock:
                self.unwritten = self.unwritten or why
                self._buf += chunk
        why = self._close()
        with self._lock:
            self.unwritten = self.unwritten or why

    def _copy(self, chunk: bytes) -> str:
        """The chunk written to the log file; why not, when it could not be ("" when it was)."""
        if self._file is None:
            return ""
        try:
            self._file.write(chunk)
            self._file.flush()
        except OSError as e:
            self._close()
            return f"{self.path}: {e.strerror or e}"
        return ""

    def _close(self) -> str:
        f, self._file = self._file, None
        if f is not None:
            try:
                f.close()
            except OSError as e:
                return f"{self.path}: {e.strerror or e}"
        return ""

    def size(self) -> int:
        with self._lock:
            return len(self._buf)

    def check(self) -> None:
        """ServerError when the log could not be kept in its file. One message, whenever it is
        found: the file failing to open, or its first write failing before or after the server
        answers (the reader thread races the start-up), once gave two messages for one cause."""
        with self._lock:
            why = self.unwritten
        if why:
            raise ServerError(f"the server's log could not be written ({why}): the rows it feeds are not recorded")

    def text(self, start: int = 0) -> str:
        """The log from byte `start`; ServerError when it could not be kept in its file."""
        self.check()
        return self.peek(start)

    def peek(self, start: int = 0) -> str:
        """The log from byte `start`, whether or not its file could be written (for error messages)."""
        with self._lock:
            return bytes(self._buf[start:]).decode("utf-8", "replace")

    def finish(self, timeout: float = 5.0) -> None:
        """After the process ended: the rest of its output read."""
        self._thread.join(timeout)


@dataclass
class Server:
    binary: Path
    model: Path
    port: int
    log_path: Path
    proc: subprocess.Popen[bytes]
    output: ServerLog
    said_greedy: bool = False  # its log has said "not byte exact" (once per vocab, at the first grammar)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self, start: int = 0) -> str:
        """The server's log from byte `start` (ServerError when its file could not be written)."""
        return self.output.text(start)

    def settled_log(self, start: int, quiet: float = 0.05, limit: float = 1.0) -> str:
        """The log from byte `start` once it holds all of one request's lines: its log thread can
        write a request's `llg error` after the response is sent, but always before the slot's
        "stop processing" line (one queue, in order), so that line ends the wait. A request that
        never reached a slot (refused up front) has none: then the log once the server has stopped
        writing for `quiet` seconds. At most `limit` either way."""
        deadline = time.monotonic() + limit
        size = self.log_size()
        while time.monotonic() < deadline:
            if SLOT_DONE in self.output.peek(start):
                break
            time.sleep(0.005)
            now = self.log_size()
            if now == size and not self._started_slot(start):
                time.sleep(quiet)
                if self.log_size() == size:
                    break
            size = self.log_size()
        return self.log(start)

    def _started_slot(self, start: int) -> bool:
        return SLOT_STARTED in self.output.peek(start)

    def log_size(self) -> int:
        return self.output.size()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def last_lines(self, n: int = 3) -> str:
        lines = [ln.strip() for ln in self.output.peek().splitlines() if ln.strip()]
        return " | ".join(lines[-n:])


def _die_with_parent() -> None:
    # PR_SET_PDEATHSIG = 1: the kernel sends SIGKILL to the server when the process that started it
    # dies, however it dies (a SIGKILLed kernel runs no finally); start_new_session keeps Ctrl-C
    # at the terminal from reaching it before we stop it in order
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def memory_bound(model: Path) -> int:
    """The address space a server on `model` may take: the file, mapped, and `MEMORY_HEADROOM`."""
    return model.stat().st_size + MEMORY_HEADROOM


def _bounded(limit: int) -> Any:
    def start() -> None:
        _die_with_parent()
        # never above a bound the caller already runs under: raising a hard limit fails the start
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        bound = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (bound, bound))

    return start


def _peak(pid: int) -> int:
    """The most address space the process has held (VmPeak), in bytes; 0 when unknown."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmPeak:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def took_too_much(exe: Path, model: Path, peak: int, limit: int) -> str:
    """Why a server still loading is stopped, or "": within half its headroom of its bound, it is
    allocating what no model needs (a doubling chat template's next step fails there, is caught
    by the server and tried again until the start timeout; a real model stays far below)."""
    if peak < limit - MEMORY_HEADROOM // 2:
        return ""
    return (
        f"{exe.name} on {model.name}: the chat template took more than {MEMORY_HEADROOM >> 31} GiB while the "
        f"server loaded (its bound: the model file and {MEMORY_HEADROOM >> 30} GiB), stopped"
    )


def stop(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGTERM to the server's process group, then SIGKILL after `grace` seconds."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def http_status(url: str, timeout: float) -> int:
    """The HTTP status of a GET (an error status too); OSError when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def answers_health(srv: Server, timeout: float) -> bool:
    """`/health` answers 200 within `timeout`; False, never an exception, when it does not (a
    stopped server times out)."""
    try:
        return http_status(srv.base + "/health", timeout) == 200
    except (OSError, ValueError):
        return False


SLOT_DONE = "stop processing:"  # server-context.cpp, server_slot::release: a request's last line
SLOT_STARTED = "processing task"  # launch_slot_with_task: a request reached a slot
LISTENING = re.compile(rb"listening on http://127\.0\.0\.1:(\d+)")


def _get_json(url: str, timeout: float) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read().decode("utf-8", "replace"))


def _is_ours(srv: Server) -> str:
    """Why the server answering on `srv.port` is not the one started (or "" when it is): it must be
    alive, and `/props` must name our model file."""
    if not srv.alive():
        return f"{srv.binary.name} exited with {srv.proc.returncode}"
    try:
        said = str(_get_json(srv.base + "/props", 5.0).get("model_path", ""))
    except (OSError, ValueError, AttributeError) as e:
        return f"/props did not answer ({type(e).__name__})"
    return "" if said and Path(said).resolve() == srv.model.resolve() else f"/props names another model ({said!r})"


SLOT_CTX = 512  # tokens of context per slot (`-c` is all the slots' together)


@contextmanager
def serve(
    exe: Path,
    model: Path,
    log_path: Path,
    *,
    parallel: int = 1,
    threads: int = 1,
    n_gpu_layers: int = 0,
    startup_timeout: float = STARTUP_TIMEOUT,
    extra: tuple[str, ...] = (),
) -> Iterator[Server]:
    """A running `exe` on `model`; stopped (with its whole process group) when the block ends.

    The server binds a port the kernel chooses (`--port 0`) and says which in its own log
    ("listening on http://127.0.0.1:PORT"): a port chosen here and bound there could meanwhile go
    to another server, whose answers were once recorded as this build's. Before the block runs,
    the server on that port must be ours (alive, and `/props` names our model). A server that
    exits, does not answer `/health` in time or is not ours raises ServerError with its log's last
    lines.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        limit = memory_bound(model)
    except OSError as e:
        raise NotStarted(f"{exe.name}: {model.name}: {e.strerror or e}") from None
    cmd = _command(exe, model, parallel, threads, n_gpu_layers, extra)
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_bounded(limit),
        )
    except OSError as e:  # a binary that is gone or not executable: that build's rows, in one line
        raise NotStarted(f"{exe.name} cannot be started: {e.strerror or e}") from None
    out = ServerLog(proc.stdout, log_path)
    srv = Server(exe, model, 0, log_path, proc, out)
    try:
        out.check()
        _await_health(srv, limit, startup_timeout)
        why = _is_ours(srv)
        if why:
            raise NotStarted(f"{exe.name}: the server on port {srv.port} is not the one started: {why}")
        yield srv
    finally:
        stop(proc)
        out.finish()
        if proc.stdout is not None:
            proc.stdout.close()


def override_args(overrides: tuple[Override, ...]) -> tuple[str, ...]:
    """llama-server's arguments for llama.cpp's key overrides: `--override-kv` each, and the log at
    trace level (`-lv 4`), the level at which the server writes its loader's "Using metadata
    override" line, so its own log shows each one taken (`compute.taken`)."""
    if not overrides:
        return ()
    return (*(a for o in overrides for a in ("--override-kv", o.text)), "-lv", "4")


def _command(
    exe: Path, model: Path, parallel: int, threads: int, n_gpu_layers: int, extra: tuple[str, ...]
) -> list[str]:
    """llama-server's command line: loopback, a port the kernel chooses, `SLOT_CTX` per slot."""
    return [
        str(exe),
        "-m",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "-c",
        str(SLOT_CTX * parallel),
        "-np",
        str(parallel),
        "-t",
        str(threads),
        "-tb",
        str(threads),
        "-ngl",
        str(n_gpu_layers),
        "--no-warmup",
        "--no-repack",
        "--log-colors",
        "off",
        *extra,
    ]


def _await_health(srv: Server, limit: int, startup_timeout: float) -> None:
    """Until the started server answers `/health` with 200 on the port its log names; NotStarted
    when it exits, takes more memory than `limit` allows, or the time runs out first."""
    exe, model, proc = srv.binary, srv.model, srv.proc
    deadline = time.monotonic() + startup_timeout
    while True:
        if not srv.alive():
            srv.output.finish()
            raise NotStarted(f"{exe.name} exited with {proc.returncode} while loading {model.name}: {srv.last_lines()}")
        if _healthy(srv):
            return
        why = took_too_much(exe, model, _peak(proc.pid), limit)
        if why:
            raise NotStarted(f"{why}: {srv.last_lines()}")
        if time.monotonic() > deadline:
            raise NotStarted(f"{exe.name} did not answer /health within {startup_timeout:.0f} s: {srv.last_lines()}")
        time.sleep(0.05)


def _healthy(srv: Server) -> bool:
    """Whether the server, once its log names its port, answers `/health` there with 200."""
    if not srv.port:
        m = LISTENING.search(srv.output.peek().encode())
        srv.port = int(m.group(1)) if m else 0
    if not srv.port:
        return False
    try:
        return http_status(srv.base + "/health", 2.0) == 200
    except (OSError, urllib.error.URLError):
        return False


@dataclass(frozen=True)
class Reply:
    status: int  # HTTP status; 0 when no answer came (the message says why)
    body: dict[str, Any] | None  # the JSON body, if it was JSON
    text: str  # the raw body, or why there was none
    seconds: float

    @property
    def error(self) -> str:
        """The body's error field's message, "" when it has none."""
        if not isinstance(self.body, dict) or "error" not in self.body:
            return ""
        e = self.body["error"]
        return str(e.get("message", e)) if isinstance(e, dict) else str(e)


def post(srv: Server, path: str, payload: Mapping[str, Any], timeout: float = REQUEST_TIMEOUT) -> Reply:
    """One request as a client sends it; never raises for what the server says or fails to say."""
    req = urllib.request.Request(
        srv.base + path, data=json.dumps(payload).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, raw = int(r.status), r.read()
    except urllib.error.HTTPError as e:
        status, raw = int(e.code), e.read()
    except (OSError, urllib.error.URLError) as e:  # a timeout, a reset, a server that died
        return Reply(0, None, f"no answer: {type(e).__name__}: {e}", time.perf_counter() - t0)
    text = raw.decode("utf-8", "replace")
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    return Reply(status, body if isinstance(body, dict) else None, text, time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(
        prog="python -m llgbridge.analyses.server.llama_server", description="build llama-server, shipped and patched"
    )
    ap.add_argument("command", choices=["build"])
    ap.parse_args(argv)
    print(
        f"[server] building llama-server (upstream and fixed) against llguidance {venv_llguidance()} and {LLG_PINNED} "
        f"...",
        flush=True,
    )
    s = build_servers()
    if s["built"]:
        names = [binary(x, v).name for x in (*SAMPLERS, *CANDIDATE_BUILDS) for v in s["llguidance"]]
        print(f"[server] built in {s['seconds']} s: {', '.join(names)}")
        for v, why in s.get("missing", {}).items():
            print(f"[server] not built against llguidance {v}: {why}")
    else:
        print(f"[server] not built: {s['reason']}")
    return 0  # a machine that cannot build records why; the server results say so


if __name__ == "__main__":
    raise SystemExit(main())
