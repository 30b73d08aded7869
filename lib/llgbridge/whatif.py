"""What if: every per-vocab analysis on a GGUF file of your own, in a report of its own.

    python -m llgbridge.whatif path/to/file.gguf [--name NAME] [-p NAME VALUE ...]
    make whatif VOCAB=path/to/file.gguf [PARAMS='-p grammar "start: /[a-z]+/"']

Runs the census, leak, forced-mask, probe, exactness and soundness notebooks on the file, and
the matrix on a synthetic model made from its tokenizer, then writes a self-contained report under
`reports/whatif/NAME/` (index.html, pr-review-tables.md, tables/*.csv, the executed notebooks).
The main report is not touched. A `-p` parameter goes to every notebook that has it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

from . import report, run
from .errors import InputError
from .paths import DATA, REPORTS, ROOT, vocab_name
from .vocab import check_gguf_file

ANALYSES = ("census", "leak", "forced", "probe", "exactness", "soundness", "matrix")


def notebook_parameters(notebook: str) -> set[str]:
    """Names assigned in a notebook's tagged parameters cell."""
    nb = nbformat.read(str(ROOT / "notebooks" / f"{notebook}.ipynb"), as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    return {ln.split("=", 1)[0].strip() for ln in cell.source.splitlines() if "=" in ln and not ln.lstrip().startswith("#")}


def whatif(
    path: Path,
    name: str | None = None,
    params: dict[str, object] | None = None,
    out: Path | None = None,
    models_dir: Path | None = None,
) -> list[dict[str, object]]:
    """Run every analysis on `path`; the report goes to `out` (default reports/whatif/NAME)."""
    path = path.resolve()
    check_gguf_file(path)
    name = name or vocab_name(path)
    out = out or REPORTS / "whatif" / name
    results = out / "results"
    params = params or {}
    for key in params:
        if not any(key in notebook_parameters(n) for n in ANALYSES):
            raise InputError(f"parameter {key}", f"no analysis notebook takes it ({', '.join(ANALYSES)})")
    statuses = []
    for i, nb in enumerate(ANALYSES, 1):
        accepted = notebook_parameters(nb)
        p = {k: v for k, v in params.items() if k in accepted}
        p["vocab_path"] = str(path)
        if nb == "matrix":
            p["models_dir"] = str(models_dir or DATA / "whatif" / name / "models")
        print(f"[whatif {name} {i}/{len(ANALYSES)}] {nb} ...", flush=True)
        st = run.execute(nb, name, p, out_root=out, results_dir=results)
        tail = f"ok in {st['seconds']}s" if st["status"] == "ok" else f"FAILED: {st['error']}"
        print(f"[whatif {name} {i}/{len(ANALYSES)}] {nb} {tail}", flush=True)
        statuses.append(st)
    report.build(results, out)
    print(f"what-if report: {out / 'index.html'}")
    return statuses


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", type=Path)
    ap.add_argument("--name", default=None)
    ap.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    a = ap.parse_args(argv)
    try:
        statuses = whatif(a.path, a.name, {k: run.parse_value(v) for k, v in a.p})
    except InputError as e:
        print(f"whatif: {e}", file=sys.stderr)
        return 2
    failed = [s for s in statuses if s["status"] != "ok"]
    for s in failed:
        print(f"FAILED {s['notebook']}: {s['error']}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

