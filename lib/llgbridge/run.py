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
import shutil
import sys
import tempfile
import time
from pathlib import Path

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
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return f"{name}: {lines[-1] if lines else ''}".strip()


def execute(
    notebook: str,
    vocab: str,
    params: dict[str, object] | None = None,
    out_root: Path | None = None,
    results_dir: Path | None = None,
    timeout: int = 1800,
) -> dict[str, object]:
    import nbformat
    import papermill as pm
    from jupyter_client.manager import KernelManager
    from nbconvert import HTMLExporter

    out_root = out_root or ROOT / "reports"
    results_dir = results_dir or RESULTS
    src = NOTEBOOKS / f"{notebook}.ipynb"
    if not src.exists():
        raise SystemExit(f"{src}: no such notebook (have: {', '.join(p.stem for p in sorted(NOTEBOOKS.glob('*.ipynb')))})")
    result = results_dir / notebook / f"{vocab}.json"
    executed = out_root / "notebooks" / notebook / f"{vocab}.ipynb"
    html = out_root / "html" / notebook / f"{vocab}.html"
    parameters = {"vocab": vocab, "results_dir": str(results_dir), **(params or {})}

    t0 = time.monotonic()
    status: dict[str, object] = {"notebook": notebook, "vocab": vocab}
    executed.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=executed.parent) as tmp:
        tmp_nb = Path(tmp) / executed.name
        # IPC sockets: no TCP ports, and no plain-text-TCP warning per run. A socket path must
        # stay under ~100 bytes, so it lives in a short folder of the system's temp dir.
        sockets = tempfile.mkdtemp(prefix="llgk")
        km = KernelManager(kernel_name="python3", transport="ipc", ip=str(Path(sockets) / "k"))
        try:
            pm.execute_notebook(
                str(src),
                str(tmp_nb),
                parameters=parameters,
                kernel_name="python3",
                language="python",
                cwd=str(ROOT),
                progress_bar=False,
                execution_timeout=timeout,
                km=km,
            )
            status["status"] = "ok"
        except BaseException as e:  # noqa: BLE001 - every failure becomes a result
            if isinstance(e, KeyboardInterrupt):
                raise
            status.update(status="failed", error=_one_line(e))
        finally:
            if km.has_kernel:  # papermill leaves a kernel it was handed running
                km.shutdown_kernel(now=True)
            shutil.rmtree(sockets, ignore_errors=True)
        if tmp_nb.exists():
            nb = nbformat.read(str(tmp_nb), as_version=4)
            body, _ = HTMLExporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True).from_notebook_node(nb)
            write_atomic(html, body)
            tmp_nb.replace(executed)
    status["seconds"] = round(time.monotonic() - t0, 2)
    if status["status"] != "ok":
        write_json(result, status)
    elif not result.exists():
        status.update(status="failed", error=f"the notebook wrote no result at {result.relative_to(ROOT)}")
        write_json(result, status)
    return status


def _parse_value(v: str) -> object:
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
    ap.add_argument("--label", default="", help="progress label, e.g. 3/19")
    a = ap.parse_args(argv)
    label = f"[{a.notebook} {a.label}] " if a.label else f"[{a.notebook}] "
    print(f"{label}{a.vocab} ...", flush=True)
    st = execute(a.notebook, a.vocab, {k: _parse_value(v) for k, v in a.p}, a.out_root, a.results)
    tail = f"ok in {st['seconds']}s" if st["status"] == "ok" else f"FAILED: {st['error']}"
    print(f"{label}{a.vocab} {tail}", flush=True, file=sys.stdout if st["status"] == "ok" else sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
