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
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import first_line
from .paths import RESULTS, ROOT, write_atomic, write_json

NOTEBOOKS = ROOT / "notebooks"


def _one_line(e: BaseException) -> str:
    name = type(e).__name__
    text = str(e).strip()
    # papermill's PapermillExecutionError carries the kernel's exception name and message
    ename = getattr(e, "ename", None)
    evalue = getattr(e, "evalue", None)
    if ename:
        name, text = ename, str(evalue or "").strip()
    if name == "DeadKernelError" or "Kernel died" in text:
        text = "the kernel died (a crash inside native code: llama.cpp or llguidance)"
    elif name in ("CellTimeoutError", "TimeoutError") or "timed out" in text.lower():
        name, text = "Timeout", "a cell ran past the per-input time limit and was stopped"
    return f"{name}: {first_line(text)}".strip()


@contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """Send this process's stderr, and so the kernel's (it inherits the descriptor), to a file.

    The kernel's start-up chatter (a plain-TCP warning per run) would otherwise bury the
    progress lines; errors are reported from the notebook's own outputs instead.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with path.open("wb") as f:
        os.dup2(f.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


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

    A notebook that does not exist is the caller's mistake, not an input's failure: that one
    raises SystemExit. `timeout` is the per-cell limit in seconds (papermill stops the kernel
    past it).
    """
    import nbformat
    import papermill as pm
    from nbconvert import HTMLExporter

    out_root = out_root or ROOT / "reports"
    results_dir = results_dir or RESULTS
    src = notebooks_dir / f"{notebook}.ipynb"
    if not src.exists():
        have = ", ".join(p.stem for p in sorted(notebooks_dir.glob("*.ipynb")))
        raise SystemExit(f"{src}: no such notebook (have: {have})")
    result = results_dir / notebook / f"{vocab}.json"
    executed = out_root / "notebooks" / notebook / f"{vocab}.ipynb"
    html = out_root / "html" / notebook / f"{vocab}.html"
    # a path inside the repository goes in relative (the notebooks run from its root), so no
    # executed notebook carries this machine's layout
    shown_results = results_dir.relative_to(ROOT) if results_dir.is_relative_to(ROOT) else results_dir
    parameters = {"vocab": vocab, "results_dir": str(shown_results), **(params or {})}

    t0 = time.monotonic()
    status: dict[str, object] = {"notebook": notebook, "vocab": vocab}
    executed.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=executed.parent) as tmp:
        tmp_nb = Path(tmp) / executed.name
        log = Path(tmp) / "kernel.log"
        try:
            with _stderr_to(log):
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
            nb.cells.insert(0, _header_cell(nbformat, src, notebook, vocab, parameters, out_root))
            _scrub(nb, [str(ROOT) + "/", str(tmp) + "/", str(out_root) + "/"])
            pmeta = nb.metadata.get("papermill", {})
            for key, path in (("input_path", src), ("output_path", executed)):
                if key in pmeta:  # papermill records absolute paths; the page must not carry them
                    pmeta[key] = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
            exporter = HTMLExporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
            body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": f"{notebook} · {vocab}"}})
            write_atomic(html, body)
            nbformat.write(nb, str(tmp_nb))
            tmp_nb.replace(executed)
    status["seconds"] = round(time.monotonic() - t0, 2)
    if status["status"] == "ok" and not result.exists():
        status.update(status="failed", error=f"the notebook wrote no result at {result.relative_to(ROOT)}")
    if status["status"] != "ok":
        write_json(result, status)
        # older than any dependency, so the next `make report` runs it again; nothing has to be
        # deleted while the Makefile is read
        os.utime(result, (0, 0))
    return status


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
    return said[-1][:300] if said else ""


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


def parse_value(v: str) -> object:
    """A `-p` value: JSON when it parses (numbers, lists, quoted strings), else the plain string."""
    import json

    try:
        return json.loads(v)
    except ValueError:
        return v


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebook")
    ap.add_argument("vocab")
    ap.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"), help="a notebook parameter (JSON or string)")
    ap.add_argument("--out-root", type=Path, default=None, help="where executed notebooks and HTML go (default reports/)")
    ap.add_argument("--results", type=Path, default=None, help="where results go (default data/results/)")
    a = ap.parse_args(argv)
    label = f"[{a.notebook}] "
    print(f"{label}{a.vocab} ...", flush=True)
    st = execute(a.notebook, a.vocab, {k: parse_value(v) for k, v in a.p}, a.out_root, a.results)
    tail = f"ok in {st['seconds']}s" if st["status"] == "ok" else f"FAILED: {st['error']}"
    print(f"{label}{a.vocab} {tail}", flush=True, file=sys.stdout if st["status"] == "ok" else sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
