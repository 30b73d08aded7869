"""Run the analyses of one vocab that are out of date, together (what `make report` runs per vocab).

    python -m llgbridge.batch VOCAB --analyses census leak ... [--stamp PATH]

Make keeps the dependency graph: one target per vocab, out of date when any file its analyses
depend on changed (`CORE`, each analysis's notebook and `MODULES`, the fixture, the native
build). This module then decides which of those analyses must really run, from what each result
records (`results.provenance`): a result is current when it is `ok`, matches its schema, was made
with the default parameters by the code that is there now (`results.code_version`) from the same
input file. So editing one analysis reruns only its notebooks, and editing the report, its
templates or the pipeline reruns none.

The chosen analyses run in one process and one kernel (`run.execute_batch`). The stamp is
written only when every analysis ended `ok`; otherwise it is dated 1970, so the next `make
report` comes back to this vocab and reruns exactly what failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .paths import RESULTS


def out_of_date(analysis: str, vocab: str, results: Path = RESULTS) -> str:
    """Why `analysis`'s result for `vocab` must be made again, or "" when it is current."""
    from . import params as P
    from .results import check, code_version, file_sha256, input_files

    p = results / analysis / f"{vocab}.json"
    if not p.exists():
        return "no result yet"
    try:
        r = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        return f"unreadable result ({type(e).__name__})"
    if not isinstance(r, dict) or r.get("status") != "ok":
        return "failed last time"
    if check(analysis, vocab, r):
        return "does not match its schema"
    prov = r.get("provenance")
    if not isinstance(prov, dict):
        return "records no provenance"
    if prov.get("code") != code_version(analysis):
        return "its code changed"
    params = prov.get("params") or {}
    if P.changed(analysis, params):
        return "made with other parameters"
    recorded = [i.get("sha256") for i in prov.get("inputs") or [] if isinstance(i, dict)]
    now = [file_sha256(f) if f.is_file() else None for f in input_files({"vocab": vocab, **params})]
    if recorded != now:
        return "its input changed"
    return ""


def plan(vocab: str, analyses: list[str], results: Path = RESULTS) -> dict[str, str]:
    """The analyses to run for `vocab`, each with why; the current ones are left out."""
    return {a: why for a in analyses if (why := out_of_date(a, vocab, results))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m llgbridge.batch", description=__doc__.splitlines()[0])
    ap.add_argument("vocab")
    ap.add_argument("--analyses", nargs="+", required=True)
    ap.add_argument("--stamp", type=Path, default=None, help="written when every analysis ends ok (dated 1970 otherwise)")
    a = ap.parse_args(argv)
    from .errors import InputError
    from .run import execute_batch

    todo = plan(a.vocab, a.analyses)
    failed = 0
    if todo:
        print(f"[{a.vocab}] " + ", ".join(f"{n} ({why})" for n, why in todo.items()), flush=True)
        try:
            statuses = execute_batch(a.vocab, list(todo))
        except InputError as e:
            print(f"[{a.vocab}] {e}", file=sys.stderr)
            return 2
        failed = sum(s["status"] != "ok" for s in statuses)
        if any("unwritten" in s for s in statuses):
            return 1  # a result that could not be written is lost to the report: Make must stop and say so
    if a.stamp is not None:
        a.stamp.parent.mkdir(parents=True, exist_ok=True)
        a.stamp.touch()
        if failed:
            os.utime(a.stamp, (0, 0))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["out_of_date", "plan"]
