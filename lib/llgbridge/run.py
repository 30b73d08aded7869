"""Execute one analysis notebook for one vocab, and render it for reviewers.

    python -m llgbridge.run census llama-spm [--file F.gguf] [--override KEY=TYPE:VALUE] [-p name value ...]

Writes, each through a temporary name:
- `reports/notebooks/NOTEBOOK/VOCAB.ipynb`, the executed notebook;
- `reports/html/NOTEBOOK/VOCAB.html`, the same rendered without code;
- the notebook's own tidy result, `data/results/NOTEBOOK/VOCAB.json`.

The kernel is a separate process, so a crash inside llama.cpp or llguidance ends that run only:
the failure is written as the result (`{"status": "failed", "error": ...}`) with a one-line
cause, and the command exits 0 so the other runs go on; `llgbridge.report` lists failures and
exits non-zero.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from difflib import get_close_matches
from html import escape
from pathlib import Path
from typing import Any, Literal, TypedDict
from urllib.parse import quote

from . import params as P
from .analyses.native.crashes import crash_cause, says_crash
from .catalogue import REAL_MODELS
from .errors import InputError, Refused, cause_line, first_line
from .fixtures import vocab_names
from .inputs import Input
from .overrides import Override, parse_all, suffix
from .paths import REPORTS, RESULTS, ROOT, VOCABS, usable_name, write_atomic, write_json
from .results import BYHAND, provenance


class RunStatus(TypedDict, total=False):
    """One run's outcome, as the runner returns it, the pool relays it (JSON) and `whatif` reads it."""

    notebook: str
    vocab: str
    status: Literal["ok", "failed"]
    error: str  # one line, when failed
    seconds: float
    log: str  # the kernel's output for a failed run, relative to the run's out_root
    unwritten: str  # set when even the failed result could not be written: why, naming the path
    timing: dict[str, float]  # wall, kernel start, cells, vocab load, the analysis's own compute


# a run's plan, checked before any kernel starts: the parameters handed to the notebook, the same
# with its defaults, its source, its result file
_Plan = tuple[dict[str, object], dict[str, object], Path, Path]

# every analysis's kernel runs under this bound of address space (RLIMIT_AS, inherited from its
# worker): a GGUF chat template that doubles a string 40 times grew llama-cpp-python's
# Jinja2ChatFormatter to the machine's memory, where a kernel here peaks at about 4 GiB
MEMORY_GIB = int(os.environ.get("LLGBRIDGE_MEMORY_GIB") or 16)
CELL_TIMEOUT = 1800  # seconds a notebook cell may run before its input fails


def bound_memory(gib: int | None = None) -> tuple[int, int]:
    """Bound this process's address space (and so its kernels') to `gib` GiB (`MEMORY_GIB`), never
    above a hard bound it already runs under (a container's); the bound it ran under before."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    want = (gib or MEMORY_GIB) << 30
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    if soft == resource.RLIM_INFINITY or soft > want:
        resource.setrlimit(resource.RLIMIT_AS, (want, hard))
    return soft, hard


def unbound_memory(before: tuple[int, int]) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, before)


def _one_line(e: BaseException) -> str:
    name = type(e).__name__
    text = str(e).strip()
    # nbclient's CellExecutionError carries the kernel's exception name and message
    ename = getattr(e, "ename", None)
    evalue = getattr(e, "evalue", None)
    if ename:
        name, text = ename, str(evalue or "").strip()
    if name == "LlgError":
        return f"{name}: {cause_line(text)}"
    if name == "MemoryError":
        text = (
            f"the run reached its memory bound, {MEMORY_GIB} GiB of address space (LLGBRIDGE_MEMORY_GIB): "
            f"the input takes more than that (a chat template that grows without end does)"
        )
    if name == "DeadKernelError" or "Kernel died" in text:
        text = "the kernel died (a crash inside native code: llama.cpp or llguidance)"
    elif name == "CellTimeoutError":  # nbclient's own: a TimeoutError raised inside a cell is that cell's error
        name, text = "Timeout", "a cell ran past the per-input time limit and was stopped"
    return f"{name}: {first_line(text)}".strip()


@contextmanager
def _output_to(path: Path) -> Iterator[None]:
    """Send this process's stdout and stderr, and so the kernel's (it inherits the descriptors),
    to a file.

    The kernel's start-up chatter (a plain-TCP warning per run), and on an abort ggml's backtrace
    (it runs gdb, about 150 lines on stdout), would otherwise bury the progress lines; errors are
    reported from the notebook's own outputs and this log's last cause line instead.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with path.open("wb") as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, old in zip((1, 2), saved):
                os.dup2(old, fd)
                os.close(old)


def execute(
    notebook: str,
    vocab: str | Input,
    params: dict[str, object] | None = None,
    out_root: Path | None = None,
    results_dir: Path | None = None,
    timeout: int = CELL_TIMEOUT,
    notebooks_dir: Path = P.NOTEBOOK_DIR,
) -> RunStatus:
    """Run `notebook` on input `vocab` (an `Input`, or a registered input's name; a `Worker` of its
    own); a failure while it runs becomes a failed result.

    A notebook that does not exist, an input name that cannot name a file or a parameter the
    notebook refuses (`params.check`) is the caller's mistake, not an input's failure: those
    raise InputError before anything runs. `timeout` is the per-cell limit in seconds (the kernel
    is stopped past it). An environment error (a full disk, a read-only folder) is the run's
    failure, one line naming the path; `status["unwritten"]` is set when even the failed result
    could not be written.
    """
    it = as_input(vocab)
    _, full, _, result = _prepare(notebook, it, params or {}, results_dir or RESULTS, notebooks_dir)
    t0 = time.monotonic()
    try:
        with Worker(out_root, results_dir, timeout, notebooks_dir, progress=False) as w:
            return w.run_vocab(it, [notebook], {notebook: params or {}})[0]
    except OSError as e:  # the environment, not the input (the worker's own folders): say which path and why
        status: RunStatus = {
            "notebook": notebook,
            "vocab": it.name,
            "status": "failed",
            "error": env_error(e),
            "seconds": round(time.monotonic() - t0, 2),
        }
        try:
            write_failed(result, status, _provenance(notebook, full, notebooks_dir))
        except OSError as e2:
            status["unwritten"] = env_error(e2)
        return status


# what every notebook imports, imported once when a kernel starts, so the import is counted as the
# kernel's start-up (overhead), not as the first notebook's analysis
# a kernel started by a pool worker inherits the worker's blocked SIGINT (pool._child): the kernel
# (its own session, out of the terminal's reach) takes interrupts again
WARM_IMPORTS = (
    "import signal; signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})\nimport numpy, pandas, matplotlib, "
    "matplotlib.pyplot, llama_cpp, llguidance\nimport llgbridge.nb, llgbridge.bridges, llgbridge.show, "
    "llgbridge.results\n%matplotlib inline"
)


class Interrupted(KeyboardInterrupt):
    """The run was stopped by a signal to this process (Ctrl-C, the pool's SIGTERM), not by its
    input: nothing is recorded for it, and the next `make report` runs it again."""


# after each notebook: what the kernel spent loading vocabs, then the notebook's names dropped
BETWEEN = "from llgbridge import nb as _nb\n_nb.between_notebooks()"


class _Kernel:
    """One kernel that runs many notebooks in turn, started again after a crash.

    A notebook's names are dropped before the next one runs (`%reset -f`), but the modules it
    imported stay loaded, and with them what `nb` caches: the vocab and its bridges are built
    once for all the analyses of a vocab, not once per analysis. The kernel manager and client
    are the ones nbclient makes for itself (as papermill's runs have them), kept open between
    notebooks, so a notebook costs its cells and a few messages, and a kernel that dies is noticed.
    """

    def __init__(self) -> None:
        # nbclient's kernel manager and client, made by the first notebook's client
        self.km: Any = None
        self.kc: Any = None
        self.start_seconds = 0.0

    def alive(self) -> bool:
        from nbclient.util import run_sync

        return self.km is not None and bool(run_sync(self.km.is_alive)())

    def _execute(self, nb: Any, timeout: int) -> Any:
        import atexit

        from nbclient import NotebookClient

        client = NotebookClient(
            nb, km=self.km, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
        )
        # the open client, set after construction (nbclient's __init__ sets kc to None): a new
        # client per notebook waits for the kernel's heartbeat, 0.2 s each time (measured here)
        client.kc = self.kc
        # nbclient puts Python's default handlers back when it is done (SIGINT's raises
        # KeyboardInterrupt, SIGTERM's ends the process at once): the ones set here stay
        main = threading.current_thread() is threading.main_thread()
        handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)} if main else {}
        try:
            return client.execute(cleanup_kc=False)
        except BaseException:
            # nbclient's own signal handler shut the kernel down: the kernel did not crash, this
            # process was asked to stop
            if getattr(client, "_async_cleanup_kernel_future", None) is not None:
                raise Interrupted("stopped by a signal while the notebook ran") from None
            raise
        finally:
            self.km, self.kc = client.km, client.kc
            # nbclient registers a clean-up per client at exit; the worker shuts its kernel itself
            atexit.unregister(client._cleanup_kernel)
            for sig, h in handlers.items():
                if h is not None:
                    signal.signal(sig, h)

    def start(self) -> None:
        import nbformat

        self.shutdown()
        t0 = time.monotonic()
        self._execute(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(WARM_IMPORTS)]), 300)
        self.start_seconds += time.monotonic() - t0

    def run(self, nb: object, timeout: int) -> object:
        if not self.alive():
            self.start()
        return self._execute(nb, timeout)

    def between(self) -> dict[str, float]:
        """Ask the kernel what it spent loading vocabs, and drop the notebook's names."""
        import json

        import nbformat

        if not self.alive():
            return {}
        done = self._execute(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(BETWEEN)]), 60)
        for out in done.cells[0].get("outputs", []):
            if out.get("name") == "stdout":
                try:
                    return {k: float(v) for k, v in json.loads(out["text"].strip().splitlines()[-1]).items()}
                except (ValueError, IndexError):
                    return {}
        return {}

    def shutdown(self) -> None:
        from nbclient.util import run_sync

        if self.kc is not None:
            try:
                self.kc.stop_channels()
            except Exception:  # noqa: BLE001 - a client of a dead kernel may already be closed
                pass
            self.kc = None
        if self.km is not None:
            try:
                run_sync(self.km.shutdown_kernel)(now=True)
            except Exception:  # noqa: BLE001 - a dead kernel has nothing left to stop
                pass
            self.km = None


def cell_seconds(nb: object) -> float:
    """The seconds the kernel spent executing `nb`'s code cells, from nbclient's timing records."""
    from datetime import datetime

    total = 0.0
    for cell in getattr(nb, "cells", []):
        ex = cell.get("metadata", {}).get("execution", {})
        a, b = ex.get("iopub.execute_input"), ex.get("shell.execute_reply")
        if a and b:
            total += (
                datetime.fromisoformat(b.replace("Z", "+00:00")) - datetime.fromisoformat(a.replace("Z", "+00:00"))
            ).total_seconds()
    return total


class Worker:
    """Runs analyses of one vocab after another in one kernel: what `make report` hands a vocab to.

    What a run per notebook paid again and again (an interpreter, papermill's imports, a kernel
    and the kernel's imports, the vocab's load, its bridges' builds, nbconvert's exporter) is paid
    once per worker, or once per vocab. Isolation stays per run: a crash inside native code ends
    its notebook's run (a failed result naming the cause, as `execute` writes it) and the next
    notebook gets a fresh kernel. The kernel's output (start-up chatter, an abort's backtrace)
    goes to one log; a failed run keeps its own part of it.

    Each status carries `timing`: the run's wall seconds, its cells' seconds, the vocab load
    among them, and `analysis` (cells less load), the compute the benchmark counts as the
    analysis's own; everything else is overhead.
    """

    def __init__(
        self,
        out_root: Path | None = None,
        results_dir: Path | None = None,
        timeout: int = CELL_TIMEOUT,
        notebooks_dir: Path = P.NOTEBOOK_DIR,
        progress: bool = True,
    ) -> None:
        self.out_root = out_root or REPORTS
        self.results_dir = results_dir or RESULTS
        self.timeout = timeout
        self.notebooks_dir = notebooks_dir
        self.kernel = _Kernel()
        self.progress = progress

    def __enter__(self) -> Worker:
        # before its kernel starts, which inherits it; given back on exit, since the host process
        # goes on: a browser a test starts after it died of SIGTRAP under the 16 GiB bound
        # (also where the Worker cannot start: an unwritable output folder left pytest's worker bound)
        (self.out_root / "logs").mkdir(parents=True, exist_ok=True)
        self._memory = bound_memory()
        try:
            sys.stdout.flush()
            # the terminal, while the kernel's output goes to a log
            self._progress = os.dup(1) if self.progress else None
            self._tmp = tempfile.TemporaryDirectory(dir=self.out_root / "logs")
            self.log = Path(self._tmp.name) / "kernel.log"
            self._redirect = _output_to(self.log)
            self._redirect.__enter__()
        except BaseException:
            unbound_memory(self._memory)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.kernel.shutdown()
        finally:
            unbound_memory(self._memory)
            self._redirect.__exit__(None, None, None)
            self._tmp.cleanup()
            if self._progress is not None:
                os.close(self._progress)

    def say(self, line: str) -> None:
        if self._progress is not None:
            os.write(self._progress, (line + "\n").encode())

    def run_vocab(
        self,
        vocab: str | Input,
        notebooks: list[str],
        params: dict[str, dict[str, object]] | None = None,
        on_status: Callable[[RunStatus], None] | None = None,
        out_root: Path | None = None,
        results_dir: Path | None = None,
    ) -> list[RunStatus]:
        """Each of `notebooks` on input `vocab` (an `Input` or a registered input's name), with its
        defaults or `params[notebook]`; `on_status`
        hears each run's status as it ends. `out_root` and `results_dir` (default the worker's)
        let one kernel serve inputs whose reports go to different places (a what-if's two sides)."""
        out_root = out_root or self.out_root
        results_dir = results_dir or self.results_dir
        it = as_input(vocab)
        plans = [
            _prepare(n, it, (params or {}).get(n, {}), results_dir, self.notebooks_dir) for n in notebooks
        ]  # every check before any kernel
        out: list[RunStatus] = []
        for notebook, plan in zip(notebooks, plans):
            status = self._run_one(notebook, it.name, plan, out_root)
            write_timing(results_dir, status)
            out.append(status)
            self.say(status_line(status))
            if on_status is not None:
                on_status(status)
        return out

    def _run_one(self, notebook: str, vocab: str, plan: _Plan, out_root: Path) -> RunStatus:
        """One notebook's run on the kernel, published, its status with its timing."""
        from papermill.iorw import load_notebook_node
        from papermill.parameterize import parameterize_notebook

        parameters, full, src, result = plan
        status: RunStatus = {"notebook": notebook, "vocab": vocab, "status": "ok"}
        t0 = time.monotonic()
        starts = self.kernel.start_seconds
        mark = self.log.stat().st_size if self.log.exists() else 0
        nb = parameterize_notebook(load_notebook_node(str(src)), parameters, kernel_name="python3", language="python")
        nb = self._execute(nb, status, out_root, mark)
        t1 = time.monotonic()
        times = self.kernel.between()
        t2 = time.monotonic()
        try:
            _publish(nb, src, notebook, vocab, parameters, out_root, [self._tmp.name + "/"])
            if status["status"] == "ok" and not result.exists():
                status["status"], status["error"] = "failed", f"the notebook wrote no result at {_rel(result)}"
            if status["status"] != "ok":
                write_failed(result, status, _provenance(notebook, full, self.notebooks_dir))
        except OSError as e:
            status["status"], status["error"], status["unwritten"] = "failed", env_error(e), env_error(e)
        wall = time.monotonic() - t0
        status["seconds"] = round(wall, 2)
        cells = cell_seconds(nb)
        load = times.get("load", 0.0)
        status["timing"] = {
            "wall": round(wall, 4),
            "kernel_start": round(self.kernel.start_seconds - starts, 4),
            "cells": round(cells, 4),
            "load": round(load, 4),
            "analysis": round(max(cells - load, 0.0), 4),
            "between": round(t2 - t1, 4),
            "publish": round(time.monotonic() - t2, 4),
        }
        return status

    def _execute(self, nb: Any, status: RunStatus, out_root: Path, mark: int) -> Any:
        """`nb` run on the kernel; a failure goes into `status` (its cause, and the log's part
        after `mark`, its output)."""
        from nbclient.exceptions import CellExecutionError

        log = self.log
        try:
            return self.kernel.run(nb, self.timeout)
        except (KeyboardInterrupt, SystemExit):  # stopped (Ctrl-C, the pool's SIGTERM): leave, the kernel with us
            self.kernel.shutdown()
            raise
        except BaseException as e:  # noqa: BLE001 - every failure becomes a result
            tail = log.read_bytes()[mark:] if log.exists() else b""
            status.update(failure(status["notebook"], status["vocab"], e, tail, out_root))
            # only a cell that raised leaves an idle kernel to reuse: one past its time limit is
            # still busy (the next notebook would wait for it, the time limit undone)
            if not isinstance(e, CellExecutionError) or not self.kernel.alive():
                self.kernel.shutdown()
            return nb


def execute_batch(
    vocab: str | Input,
    notebooks: list[str],
    out_root: Path | None = None,
    results_dir: Path | None = None,
    timeout: int = CELL_TIMEOUT,
    notebooks_dir: Path = P.NOTEBOOK_DIR,
) -> list[RunStatus]:
    """Run several analyses of one vocab, with their default parameters, in one kernel (`Worker`)."""
    with Worker(out_root, results_dir, timeout, notebooks_dir) as w:
        return w.run_vocab(vocab, notebooks)


def write_timing(results_dir: Path, st: RunStatus) -> None:
    """A run's timing, beside the results (`RESULTS/.timing/NOTEBOOK/VOCAB.json`): run metadata
    that `bench.report_regeneration` reads, never a result or a table."""
    timing = st.get("timing")
    if not isinstance(timing, dict):
        return
    timing.setdefault("wall", st.get("seconds", 0.0))
    try:
        write_json(
            results_dir / ".timing" / str(st["notebook"]) / f"{st['vocab']}.json",
            {"notebook": st["notebook"], "vocab": st["vocab"], "status": st["status"], **timing},
        )
    except OSError:
        pass  # only a measurement: never the run's failure


def fast_imports() -> None:
    """Leave out an import nothing here needs: jupyter-events asks for jsonschema[format-nongpl],
    whose `rfc3987_syntax` compiles 38 lark grammars when jsonschema is imported (2.2 s of every
    process that imports nbformat, measured here). nbformat's schema checks no IRI format.

    Only for the runner's own processes (`run`, `batch`): a kernel, or a test that checks IRI
    formats with jsonschema, is not touched.
    """
    if "jsonschema" not in sys.modules:
        sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]


def shown_results(results_dir: Path) -> str:
    """`results_dir` as a run names it to its notebook: a path inside the repository goes in relative
    (the notebooks run from its root), so no executed notebook carries this machine's layout."""
    return str(results_dir.relative_to(ROOT) if results_dir.is_relative_to(ROOT) else results_dir)


def as_input(vocab: str | Input) -> Input:
    """An input as the runner takes it: made at its edge already, or a registered input's name."""
    return vocab if isinstance(vocab, Input) else Input.make(vocab)


def input_name(vocab: str | Input) -> str:
    """The name a status gives the input `vocab` (an `Input`, or a registered input's name)."""
    return vocab.name if isinstance(vocab, Input) else vocab


def _prepare(notebook: str, it: Input, params: dict[str, object], results_dir: Path, notebooks_dir: Path) -> _Plan:
    """(the parameters handed to the notebook, the same with its defaults, its source, its result file).

    The parameters are checked here, before any kernel starts; the input was, where it was made.
    """
    parameters = {"input": it.param(), "results_dir": shown_results(results_dir), **params}
    full = P.check(notebook, parameters, notebooks_dir)
    return parameters, full, P.notebook_file(notebook, notebooks_dir), results_dir / notebook / f"{it.name}.json"


def env_error(e: OSError) -> str:
    """An environment error in one line naming the path: `data/results/x.json: No space left on device`."""
    where = e.filename or ""
    return f"{_rel(Path(os.fsdecode(where))) if where else type(e).__name__}: {e.strerror or e}"


def _rel(p: Path) -> str:
    return str(p.relative_to(ROOT)) if p.is_absolute() and p.is_relative_to(ROOT) else str(p)


def failure(notebook: str, vocab: str, e: BaseException, log: bytes, out_root: Path) -> RunStatus:
    """A run's failure: the cause in one line (where the kernel died, the line native code aborted
    with), and the kernel's output for this run kept as its log."""
    st: RunStatus = {"status": "failed", "error": _one_line(e)}
    cause = native_cause(log)
    if cause and "kernel died" in st["error"]:
        st["error"] = f"the kernel died: {cause}"
    if log.strip():
        kept = out_root / "logs" / notebook / f"{vocab}.log"
        write_atomic(kept, log)
        st["log"] = str(kept.relative_to(out_root))
    return st


def _provenance(notebook: str, params: dict[str, object], notebooks_dir: Path) -> object:
    """What a failed result records as its provenance: none for a notebook outside notebooks/
    (a test's), whose code version the suite does not know."""
    return provenance(notebook, params) if notebooks_dir == P.NOTEBOOK_DIR else None


def write_failed(result: Path, status: RunStatus, provenance: object) -> None:
    """A failed run's result: the next `make report`'s plan runs it again ("failed last time").
    Dated 1970 too, so no file's date can make it look newer than its inputs."""
    write_json(result, {**{k: v for k, v in status.items() if k != "timing"}, "provenance": provenance})
    os.utime(result, (0, 0))


def status_line(st: RunStatus) -> str:
    """A run's progress line: `[leak] gpt-2 ok in 0.91s` or `[leak] gpt-2 FAILED: <cause>`."""
    tail = f"ok in {st['seconds']}s" if st["status"] == "ok" else f"FAILED: {st['error']}"
    return f"[{st['notebook']}] {st['vocab']} {tail}"


def _exporter() -> object:
    """nbconvert's HTML exporter without code, built once per process (it loads its templates)."""
    global _EXPORTER
    if _EXPORTER is None:
        from nbconvert import HTMLExporter

        _EXPORTER = HTMLExporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
    return _EXPORTER


_EXPORTER: object | None = None


def _publish(
    nb: object, src: Path, notebook: str, vocab: str, parameters: dict[str, object], out_root: Path, scratch: list[str]
) -> None:
    """The executed notebook and its HTML page, each with a header and without this machine's paths."""
    import nbformat

    executed = out_root / "notebooks" / notebook / f"{vocab}.ipynb"
    html = out_root / "html" / notebook / f"{vocab}.html"
    nb.cells.insert(0, _header_cell(nbformat, src, notebook, vocab, parameters, out_root))  # type: ignore[attr-defined]
    # the two cells made here and by papermill get fixed ids (nbformat draws random ones), so a
    # page is the same bytes whichever run made it
    for cell in nb.cells:  # type: ignore[attr-defined]
        if cell is nb.cells[0]:  # type: ignore[attr-defined]
            cell["id"] = "report-header"
        elif "injected-parameters" in cell.get("metadata", {}).get("tags", []):
            cell["id"] = "injected-parameters"
    _scrub(nb, [str(ROOT) + "/", *scratch, str(out_root) + "/"])
    pmeta = nb.metadata.get("papermill", {})  # type: ignore[attr-defined]
    for key, path in (("input_path", src), ("output_path", executed)):
        if key in pmeta:  # papermill records absolute paths; the page must not carry them
            pmeta[key] = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
    body, _ = _exporter().from_notebook_node(nb, resources={"metadata": {"name": f"{notebook} · {vocab}"}})  # type: ignore[attr-defined]
    write_atomic(html, body)
    write_atomic(executed, nbformat.writes(nb))


def _scrub(nb: object, prefixes: list[str]) -> None:
    """Take this machine's paths out of every output (tracebacks name files absolutely)."""

    def clean(x: object) -> object:
        if isinstance(x, str):
            for pre in prefixes:
                x = x.replace(pre, "")
            return x
        if isinstance(x, list):
            return [clean(y) for y in x]
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        return x

    for cell in getattr(nb, "cells", []):
        for out in cell.get("outputs", []):
            for key in ("text", "traceback", "evalue", "data"):
                if key in out:
                    out[key] = clean(out[key])


def native_cause(log: bytes) -> str:
    """Why native code died, from a kernel's output (`native.crashes.crash_cause`: an out-of-memory
    named as such, else the GGML_ASSERT or exception line, without directories or pids), or ""
    when the output says nothing about it."""
    text = log.decode("utf-8", "replace")
    return crash_cause(text)[:300] if says_crash(text) else ""


def _header_cell(
    nbformat: Any, src: Path, notebook: str, vocab: str, parameters: dict[str, object], out_root: Path
) -> Any:
    """A title, the way back to the report, and every parameter as it ran (defaults included).

    Pages live at `OUT/html/NOTEBOOK/VOCAB.html`, beside `OUT/index.html` and `OUT/vocab/`.
    """
    import json

    import papermill as pm

    declared = pm.inspect_notebook(str(src))
    rows = []
    for name in [*declared, *(k for k in parameters if k not in declared)]:
        if name in parameters:
            value, how = json.dumps(parameters[name], ensure_ascii=False), "given"
        else:
            value, how = str(declared[name].get("default")), "default"
        rows.append(f"<tr><td><code>{escape(name)}</code></td><td><code>{escape(value)}</code></td><td>{how}</td></tr>")
    # HTML, escaped, not Markdown: nbconvert passes a Markdown cell's raw HTML through, and a value
    # (a file name with a backtick, a literal) between hand-written backticks became a tag on the
    # page (issue 48, break 7); inside an HTML block nothing is read as Markdown
    md = (
        f"<h1>{escape(notebook)} · {escape(vocab)}</h1>\n\n"
        f'<p><a href="../../index.html">← the report</a> · '
        f'<a href="../../vocab/{escape(quote(vocab, safe="+"))}.html">{escape(vocab)} in every analysis</a></p>\n\n'
        "<p>The parameters of this run:</p>\n\n<table><thead><tr><th>parameter</th><th>value</th><th></th></tr></thead>"
        "<tbody>" + "".join(rows) + "</tbody></table>\n"
    )
    return nbformat.v4.new_markdown_cell(md)


# a by-hand run with other settings than the defaults: its own place, as whatif's, never the main
# results or the main report's pages
BYHAND_REPORTS = REPORTS / "byhand"


def _print_status(label: str, vocab: str, st: RunStatus) -> None:
    print(status_line(st), flush=True, file=sys.stdout if st["status"] == "ok" else sys.stderr)
    if "unwritten" in st:
        print(f"{label}{vocab} its result could not be written: {st['unwritten']}", file=sys.stderr, flush=True)


def model_name(path: str) -> str:
    """The input name of a model given to `make matrix`: `model-` and its file name, every
    character a name cannot hold replaced, so it never replaces a synthetic model's rows."""
    stem = Path(path).name.removesuffix(".gguf")
    return ("model-" + usable_name(stem))[:128]


def models_problem(files: list[str]) -> str:
    """Why `make matrix` cannot take these model files, or "": one that is not a file, or two that
    would share an input name (the second's result would replace the first's)."""
    for f in files:
        if not Path(f).is_file():
            return f"{f}: no such file; nothing was run"
    seen: dict[str, str] = {}
    for f in files:
        if (name := model_name(f)) in seen:
            return f"{seen[name]} and {f} would both be the input {name}: rename one of them; nothing was run"
        seen[name] = f
    return ""


def missing_input(it: Input) -> str:
    """Why a run by hand of `it` has no input to read (a mistyped name), or "". A file given with
    it (`--file`, `--models`) is the notebook's to load and refuse, naming it."""
    if not it.registered or it.path.exists():
        return ""
    known = [*vocab_names(VOCABS), *REAL_MODELS]
    if it.name in known:
        return f"{_rel(it.path)} is not fetched yet (make data, make models); nothing was run"
    close = get_close_matches(it.name, known, n=1)
    hint = f"did you mean {close[0]}?" if close else f"the inputs: {', '.join(sorted(known))}"
    return f"no such input: {_rel(it.path)} does not exist ({hint}); nothing was run"


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebook")
    ap.add_argument("vocab", nargs="?", default=None, metavar="NAME", help="the input's name")
    ap.add_argument(
        "-p",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="a notebook parameter (JSON or string)",
    )
    ap.add_argument(
        "--out-root", type=Path, default=None, help="where executed notebooks and HTML go (default reports/)"
    )
    ap.add_argument("--results", type=Path, default=None, help="where results go (default data/results/)")
    ap.add_argument("--file", default="", help="a GGUF file whose tokenizer is the input NAME, instead of its own")
    ap.add_argument(
        "--models", default=None, help="matrix only: model files, as a shell would split them (make matrix MODELS=...)"
    )
    ap.add_argument(
        "--override",
        default="",
        help="llama.cpp key overrides, KEY=TYPE:VALUE, split as a shell would (make matrix OVERRIDE=...)",
    )
    return ap


# what names the input on the command line: the notebooks take it as one value (llgbridge.inputs)
_INPUT_PARAMS = {"vocab": "NAME", "vocab_path": "--file FILE", "overrides": "--override", "models": "--models"}


def _overrides(text: str) -> tuple[Override, ...]:
    try:
        return parse_all(P.from_argv(x) for x in shlex.split(text))
    except ValueError as e:  # InputError, or shlex's unbalanced quote
        raise Refused(f"OVERRIDE: {e}") from e


def _model_runs(models: str, ovs: tuple[Override, ...], name: str | None = None) -> list[Input]:
    """The inputs of `make matrix MODELS=... OVERRIDE=...`: one per model file, each named after
    its file (`model_name`), or one file under the `name` given."""
    try:
        files = shlex.split(models)
    except ValueError as e:
        raise Refused(f"MODELS: {e}") from e
    if not files:
        raise Refused('usage: make matrix MODELS="a.gguf b.gguf" [N_GPU_LAYERS=99] [OVERRIDE="KEY=TYPE:VALUE"]')
    if why := models_problem(files):
        raise Refused(f"MODELS: {why}")
    if name is not None and len(files) > 1:
        raise Refused(f"{name}: one name for {len(files)} model files; give one file, or no name (each its own)")
    # a model loaded with overrides is another input: its own name, and the overrides with it
    try:
        return [
            Input.make(name or (model_name(f) + suffix(ovs))[:128], models=[str(Path(f).resolve())], overrides=ovs)
            for f in files
        ]
    except InputError as e:
        raise Refused(f"OVERRIDE: {e}") from e


def _inputs(a: argparse.Namespace, params: dict[str, object]) -> list[Input]:
    """The inputs a command line names, each made once here (`Input.make`)."""
    label = f"[{a.notebook}] "
    if old := [k for k in params if k in _INPUT_PARAMS]:
        raise Refused(f"{label}-p {old[0]}: the input is not a notebook parameter; give it as {_INPUT_PARAMS[old[0]]}")
    ovs = _overrides(a.override)
    if a.models is not None:
        return _model_runs(a.models, ovs, a.vocab)
    if a.vocab is None:
        raise Refused(f"{label}an input's name is needed (a fixture's short name, or a real model's)")
    try:
        it = Input.make(a.vocab, file=a.file, overrides=ovs)
    except InputError as e:
        raise Refused(f"{label}{a.vocab}: {e}") from e
    if why := missing_input(it):
        # refused before anything runs: a failed result under a name that never was an input
        # would be reported by the next make report as an input that went away
        raise Refused(f"{label}{a.vocab}: {why}")
    return [it]


def _run_by_hand(a: argparse.Namespace, it: Input, p: dict[str, object]) -> RunStatus:
    """One run of `a.notebook` on `it`; non-default parameters send it to the by-hand places."""
    label, vocab = f"[{a.notebook}] ", it.name
    out_root, results = a.out_root, a.results
    try:
        full = P.check(a.notebook, {"input": it.param(), **p})
        changed = P.changed(a.notebook, full)
    except InputError as e:
        raise Refused(f"{label}{vocab}: {e}") from e
    if changed and results is None:
        out_root, results = out_root or BYHAND_REPORTS, BYHAND
        print(
            f"{label}{vocab}: non-default parameters ({', '.join(changed)}): the result goes to {_rel(results)}, "
            f"the pages to {_rel(out_root)}; the main report is left alone",
            flush=True,
        )
    print(f"{label}{vocab} ...", flush=True)
    try:
        return execute(a.notebook, it, p, out_root, results)
    except InputError as e:
        raise Refused(f"{label}{vocab}: {e}") from e


def main(argv: list[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    fast_imports()
    label = f"[{a.notebook}] "
    params = {k: P.parse_value(v) for k, v in a.p}
    code = 0
    try:
        for it in _inputs(a, params):
            st = _run_by_hand(a, it, params)
            _print_status(label, it.name, st)
            # a failed run, or a result that could not be written (lost to the report), is the command's
            # exit too: the FAILED line alone left a script or a newcomer reading 0 as success
            code = code or (1 if "unwritten" in st or st["status"] != "ok" else 0)
    except Refused as e:
        print(e, file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    raise SystemExit(main())
