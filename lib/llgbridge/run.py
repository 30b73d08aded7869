"""Execute one analysis notebook for one vocab with papermill, and render it for reviewers.

    python -m llgbridge.run census llama-spm [-p name value ...] [--out-root DIR]

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
import re
import shlex
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from . import params as P
from .errors import InputError, cause_line, first_line
from .paths import RESULTS, ROOT, name_problem, write_atomic, write_json

NOTEBOOKS = ROOT / "notebooks"


def _one_line(e: BaseException) -> str:
    name = type(e).__name__
    text = str(e).strip()
    # papermill's PapermillExecutionError carries the kernel's exception name and message
    ename = getattr(e, "ename", None)
    evalue = getattr(e, "evalue", None)
    if ename:
        name, text = ename, str(evalue or "").strip()
    if name == "LlgError":
        return f"{name}: {cause_line(text)}"
    if name == "DeadKernelError" or "Kernel died" in text:
        text = "the kernel died (a crash inside native code: llama.cpp or llguidance)"
    elif name in ("CellTimeoutError", "TimeoutError") or "timed out" in text.lower():
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
    vocab: str,
    params: dict[str, object] | None = None,
    out_root: Path | None = None,
    results_dir: Path | None = None,
    timeout: int = 1800,
    notebooks_dir: Path = NOTEBOOKS,
) -> dict[str, object]:
    """Run `notebook` for `vocab`; a failure while it runs becomes a failed result.

    A notebook that does not exist, a vocab name that cannot name a file or a parameter the
    notebook refuses (`params.check`) is the caller's mistake, not an input's failure: those
    raise InputError before anything runs. `timeout` is the per-cell limit in seconds (papermill
    stops the kernel past it). An environment error (a full disk, a read-only folder) is the
    run's failure, one line naming the path; `status["unwritten"]` is set when even the failed
    result could not be written.
    """
    out_root = out_root or ROOT / "reports"
    results_dir = results_dir or RESULTS
    parameters, full, src, result = _prepare(notebook, vocab, params or {}, results_dir, notebooks_dir)

    t0 = time.monotonic()
    status: dict[str, object] = {"notebook": notebook, "vocab": vocab}
    try:
        _run(src, notebook, vocab, parameters, out_root, timeout, status)
    except OSError as e:  # the environment, not the input: say which path and why
        status.update(status="failed", error=env_error(e))
    status["seconds"] = round(time.monotonic() - t0, 2)
    if status["status"] == "ok" and not result.exists():
        status.update(status="failed", error=f"the notebook wrote no result at {_rel(result)}")
    if status["status"] != "ok":
        try:
            from .results import provenance

            write_json(result, {**status, "provenance": provenance(notebook, full) if notebooks_dir == NOTEBOOKS else None})
            # older than any dependency, so the next `make report` runs it again; nothing has to
            # be deleted while the Makefile is read
            os.utime(result, (0, 0))
        except OSError as e:
            status["unwritten"] = env_error(e)
    return status


class _Kernel:
    """One kernel that runs several notebooks in turn, started again after a crash.

    A notebook's names are dropped before the next one runs (`%reset -f`), but the modules it
    imported stay loaded, and with them what `nb` caches: the vocab and its bridges are built
    once for all the analyses of a vocab, not once per analysis. The kernel manager is the one
    nbclient makes for itself (as papermill's runs have it), so a kernel that dies is noticed.
    """

    def __init__(self) -> None:
        self.km: object | None = None

    def alive(self) -> bool:
        from nbclient.util import run_sync

        return self.km is not None and bool(run_sync(self.km.is_alive)())  # type: ignore[attr-defined]

    def run(self, nb: object, timeout: int) -> object:
        from nbclient import NotebookClient

        resources = {"metadata": {"path": str(ROOT)}}
        if not self.alive():
            self.shutdown()
            client = NotebookClient(nb, timeout=timeout, kernel_name="python3", resources=resources)
            try:
                return client.execute(cleanup_kc=False)
            finally:
                self.km = client.km
        import nbformat

        reset = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("%reset -f")])
        NotebookClient(reset, km=self.km, timeout=60, kernel_name="python3", resources=resources).execute()
        return NotebookClient(nb, km=self.km, timeout=timeout, kernel_name="python3", resources=resources).execute()

    def shutdown(self) -> None:
        from nbclient.util import run_sync

        if self.km is not None:
            try:
                run_sync(self.km.shutdown_kernel)(now=True)  # type: ignore[attr-defined]
            except Exception:  # noqa: BLE001 - a dead kernel has nothing left to stop
                pass
            self.km = None


def execute_batch(
    vocab: str,
    notebooks: list[str],
    out_root: Path | None = None,
    results_dir: Path | None = None,
    timeout: int = 1800,
    notebooks_dir: Path = NOTEBOOKS,
) -> list[dict[str, object]]:
    """Run several analyses of one vocab, with their default parameters, in one kernel.

    What a run per notebook paid again and again (an interpreter, papermill's imports, a
    kernel and the kernel's imports, the vocab's load, its bridges' builds, nbconvert's
    exporter) is paid once. Isolation stays per vocab: a crash inside native code ends its
    notebook's run (a failed result naming the cause, as `execute` writes it) and the next
    notebook gets a fresh kernel.
    """
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    out_root = out_root or ROOT / "reports"
    results_dir = results_dir or RESULTS
    plans = [_prepare(n, vocab, {}, results_dir, notebooks_dir) for n in notebooks]  # every check before any kernel
    kernel = _Kernel()
    out: list[dict[str, object]] = []
    (out_root / "logs").mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    progress = os.dup(1)  # the terminal, kept for progress lines while the kernel's output goes to a log
    with tempfile.TemporaryDirectory(dir=out_root / "logs") as tmp:
        log = Path(tmp) / "kernel.log"
        with _output_to(log):
            for notebook, (parameters, full, src, result) in zip(notebooks, plans):
                status: dict[str, object] = {"notebook": notebook, "vocab": vocab}
                t0 = time.monotonic()
                mark = log.stat().st_size if log.exists() else 0
                nb = parameterize_notebook(load_notebook_node(str(src)), parameters, kernel_name="python3", language="python")
                try:
                    nb = kernel.run(nb, timeout)
                    status["status"] = "ok"
                except KeyboardInterrupt:
                    kernel.shutdown()
                    raise
                except BaseException as e:  # noqa: BLE001 - every failure becomes a result
                    status.update(status="failed", error=_one_line(e))
                    segment = log.read_bytes()[mark:] if log.exists() else b""
                    part = Path(tmp) / f"{notebook}.log"
                    part.write_bytes(segment)
                    cause = native_cause(part)
                    if cause and "kernel died" in str(status["error"]):
                        status["error"] = f"the kernel died: {cause}"
                    if segment.strip():
                        kept = out_root / "logs" / notebook / f"{vocab}.log"
                        write_atomic(kept, segment)
                        status["log"] = str(kept.relative_to(out_root))
                    if not kernel.alive():
                        kernel.shutdown()
                try:
                    _publish(nb, src, notebook, vocab, parameters, out_root, [tmp + "/"])
                    if status["status"] == "ok" and not result.exists():
                        status.update(status="failed", error=f"the notebook wrote no result at {_rel(result)}")
                    if status["status"] != "ok":
                        from .results import provenance

                        prov = provenance(notebook, full) if notebooks_dir == NOTEBOOKS else None
                        write_json(result, {**status, "provenance": prov})
                        os.utime(result, (0, 0))
                except OSError as e:
                    status.update(status="failed", error=env_error(e), unwritten=env_error(e))
                status["seconds"] = round(time.monotonic() - t0, 2)
                out.append(status)
                os.write(progress, (f"[{notebook}] {vocab} " + (f"ok in {status['seconds']}s" if status["status"] == "ok"
                                    else f"FAILED: {status['error']}") + "\n").encode())
            kernel.shutdown()
    os.close(progress)
    return out


def _prepare(notebook: str, vocab: str, params: dict[str, object], results_dir: Path,
             notebooks_dir: Path) -> tuple[dict[str, object], dict[str, object], Path, Path]:
    """(the parameters handed to the notebook, the same with its defaults, its source, its result file).

    The vocab's name and the parameters are checked here, before any kernel starts.
    """
    why = name_problem(vocab)
    if why:
        raise InputError("vocab", why)
    # a path inside the repository goes in relative (the notebooks run from its root), so no
    # executed notebook carries this machine's layout
    shown_results = results_dir.relative_to(ROOT) if results_dir.is_relative_to(ROOT) else results_dir
    parameters = {"vocab": vocab, "results_dir": str(shown_results), **params}
    full = P.check(notebook, parameters, notebooks_dir)
    return parameters, full, notebooks_dir / f"{notebook}.ipynb", results_dir / notebook / f"{vocab}.json"


def env_error(e: OSError) -> str:
    """An environment error in one line naming the path: `data/results/x.json: No space left on device`."""
    where = e.filename or ""
    return f"{_rel(Path(os.fsdecode(where))) if where else type(e).__name__}: {e.strerror or e}"


def _rel(p: Path) -> str:
    return str(p.relative_to(ROOT)) if p.is_absolute() and p.is_relative_to(ROOT) else str(p)


def _run(src: Path, notebook: str, vocab: str, parameters: dict[str, object], out_root: Path, timeout: int,
         status: dict[str, object]) -> None:
    import nbformat
    import papermill as pm

    executed = out_root / "notebooks" / notebook / f"{vocab}.ipynb"
    executed.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=executed.parent) as tmp:
        tmp_nb = Path(tmp) / executed.name
        log = Path(tmp) / "kernel.log"
        try:
            with _output_to(log):
                pm.execute_notebook(
                    str(src),
                    str(tmp_nb),
                    parameters=parameters,
                    kernel_name="python3",
                    language="python",
                    cwd=str(ROOT),
                    progress_bar=False,
                    execution_timeout=timeout,
                )
            status["status"] = "ok"
        except BaseException as e:  # noqa: BLE001 - every failure becomes a result
            if isinstance(e, KeyboardInterrupt):
                raise
            if isinstance(e, OSError) and e.filename:
                raise
            status.update(status="failed", error=_one_line(e))
            cause = native_cause(log)
            if cause and "kernel died" in str(status["error"]):
                status["error"] = f"the kernel died: {cause}"
            if log.exists() and log.stat().st_size:
                kept = out_root / "logs" / notebook / f"{vocab}.log"
                write_atomic(kept, log.read_bytes())
                status["log"] = str(kept.relative_to(out_root)) if kept.is_relative_to(out_root) else str(kept)
        if tmp_nb.exists():
            nb = nbformat.read(str(tmp_nb), as_version=4)
            _publish(nb, src, notebook, vocab, parameters, out_root, [str(tmp) + "/"])


def _exporter() -> object:
    """nbconvert's HTML exporter without code, built once per process (it loads its templates)."""
    global _EXPORTER
    if _EXPORTER is None:
        from nbconvert import HTMLExporter

        _EXPORTER = HTMLExporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
    return _EXPORTER


_EXPORTER: object | None = None


def _publish(nb: object, src: Path, notebook: str, vocab: str, parameters: dict[str, object], out_root: Path,
             scratch: list[str]) -> None:
    """The executed notebook and its HTML page, each with a header and without this machine's paths."""
    import nbformat

    executed = out_root / "notebooks" / notebook / f"{vocab}.ipynb"
    html = out_root / "html" / notebook / f"{vocab}.html"
    nb.cells.insert(0, _header_cell(nbformat, src, notebook, vocab, parameters, out_root))  # type: ignore[attr-defined]
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


def native_cause(log: Path) -> str:
    """The last line of a kernel's stderr that says why native code aborted, if any."""
    try:
        lines = log.read_text("utf-8", "replace").splitlines()
    except OSError:
        return ""
    keys = ("GGML_ASSERT", "GGML_ABORT", "terminate called", "what():", "Assertion", "panicked at", "Segmentation fault")
    said = [ln.strip() for ln in lines if any(k in ln for k in keys)]
    # `/tmp/pip-install-…/vendor/llama.cpp/src/llama-vocab.cpp:2544: GGML_ASSERT(…)`: the build
    # machine's directories say nothing, and no report may carry them
    return re.sub(r"(?:/[^\s:/]+)+/([^\s:/]+:\d+)", r"\1", said[-1])[:300] if said else ""


def _header_cell(nbformat, src: Path, notebook: str, vocab: str, parameters: dict[str, object], out_root: Path):  # type: ignore[no-untyped-def]
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
        rows.append(f"| `{name}` | `{value.replace('|', '&#124;')}` | {how} |")
    md = (
        f"# {notebook} · {vocab}\n\n[← the report](../../index.html) · "
        f"[{vocab} in every analysis](../../vocab/{vocab}.html)\n\n"
        "The parameters of this run:\n\n| parameter | value | |\n|---|---|---|\n" + "\n".join(rows) + "\n"
    )
    return nbformat.v4.new_markdown_cell(md)


parse_value = P.parse_value  # whatif's name for it

# a by-hand run with other settings than the defaults: its own place, as whatif's, never the main
# results or the main report's pages
BYHAND_REPORTS = ROOT / "reports" / "byhand"


def _print_status(label: str, vocab: str, st: dict[str, object]) -> None:
    tail = f"ok in {st['seconds']}s" if st["status"] == "ok" else f"FAILED: {st['error']}"
    print(f"{label}{vocab} {tail}", flush=True, file=sys.stdout if st["status"] == "ok" else sys.stderr)
    if "unwritten" in st:
        print(f"{label}{vocab} its result could not be written: {st['unwritten']}", file=sys.stderr, flush=True)


def model_name(path: str) -> str:
    """The input name of a model given to `make matrix`: `model-` and its file name, every
    character a name cannot hold replaced, so it never replaces a synthetic model's rows."""
    stem = Path(path).name.removesuffix(".gguf")
    return ("model-" + re.sub(r"[^A-Za-z0-9._+-]", "_", stem))[:128]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebook")
    ap.add_argument("vocab", nargs="?", default=None)
    ap.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"), help="a notebook parameter (JSON or string)")
    ap.add_argument("--out-root", type=Path, default=None, help="where executed notebooks and HTML go (default reports/)")
    ap.add_argument("--results", type=Path, default=None, help="where results go (default data/results/)")
    ap.add_argument("--models", default=None, help="matrix only: model files, as a shell would split them (make matrix MODELS=...)")
    a = ap.parse_args(argv)
    label = f"[{a.notebook}] "
    params = {k: parse_value(v) for k, v in a.p}
    runs: list[tuple[str, dict[str, object]]] = []
    if a.models is not None:
        try:
            files = shlex.split(a.models)
        except ValueError as e:
            print(f"MODELS: {e}", file=sys.stderr)
            return 2
        if not files:
            print('usage: make matrix MODELS="a.gguf b.gguf" [N_GPU_LAYERS=99]', file=sys.stderr)
            return 2
        runs = [(model_name(f), {**params, "models": [str(Path(f).resolve())]}) for f in files]
    elif a.vocab is None:
        ap.error("a vocab name is needed")
    else:
        runs = [(a.vocab, params)]
    code = 0
    for vocab, p in runs:
        out_root, results = a.out_root, a.results
        try:
            full = P.check(a.notebook, {"vocab": vocab, **p})
            changed = P.changed(a.notebook, full)
        except InputError as e:
            print(f"{label}{vocab}: {e}", file=sys.stderr)
            return 2
        if changed and results is None:
            out_root, results = out_root or BYHAND_REPORTS, RESULTS.parent / "byhand"
            print(f"{label}{vocab}: non-default parameters ({', '.join(changed)}): the result goes to "
                  f"{_rel(results)}, the pages to {_rel(out_root)}; the main report is left alone", flush=True)
        print(f"{label}{vocab} ...", flush=True)
        try:
            st = execute(a.notebook, vocab, p, out_root, results)
        except InputError as e:
            print(f"{label}{vocab}: {e}", file=sys.stderr)
            return 2
        _print_status(label, vocab, st)
        # a result that could not be written is lost to the report: Make must stop and say so
        code = code or (1 if "unwritten" in st else 0)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
