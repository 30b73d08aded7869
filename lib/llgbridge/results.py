"""The contract between the analyses and the report: what a result file holds, and its one loader.

Each (analysis, vocab) run writes `data/results/ANALYSIS/VOCAB.json` (`nb.write_result`, or
`run.execute` for a failure). `SCHEMAS` says, per analysis, which keys an `ok` result carries and
of which JSON type, and which columns every row of its tables has. `load` is the only way the
report reads results: a file that is not JSON, not a result, of another vocab, or that lacks a
key becomes a failed input with that cause in one line, so one bad file never costs the report.

Cost: reading and checking a result is a json.loads; the 19 fixtures' results load in well
under a second.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Schema:
    keys: dict[str, type]  # top-level key -> JSON type (list, dict, str, int, float)
    tables: dict[str, tuple[str, ...]]  # key holding a list of rows (or one row) -> columns each row has


_BRIDGE_ROW = ("vocab", "bridge")
SCHEMAS: dict[str, Schema] = {
    "census": Schema({"summary": dict, "diffs": list}, {"summary": ("vocab", "differing", "n_tokens", "lost_leading_space")}),
    "leak": Schema({"grammar": str, "rows": list, "leaked": dict}, {"rows": _BRIDGE_ROW}),
    "forced": Schema({"literal": str, "rows": list}, {"rows": _BRIDGE_ROW}),
    "probe": Schema({"probe": dict, "cases": list}, {"probe": ("vocab", "tokenize_exact", "greedy")}),
    "native": Schema({"rows": list, "differences": list, "tests": list}, {"rows": ("vocab", "sampler", "diff_cells", "diff_differ")}),
    "matrix": Schema({"rows": list, "device": str, "n_gpu_layers": int, "temperature": (int, float), "seed": int,  # type: ignore[dict-item]
                      "max_tokens": int}, {"rows": ("model", "vocab", "case", "bridge", "outcome")}),
    "exactness": Schema({"n_inputs": int, "bridges": list, "exactness": list, "probe_vs_exactness": dict},
                        {"bridges": _BRIDGE_ROW, "exactness": _BRIDGE_ROW, "probe_vs_exactness": ("vocab", "cell")}),
    "soundness": Schema({"soundness": list}, {"soundness": _BRIDGE_ROW}),
}


def check(analysis: str, stem: str, r: Any) -> str:
    """Why result `r` (from file `stem`.json) cannot be used, or "" when it can."""
    if not isinstance(r, dict):
        return f"not a result object (a JSON {type(r).__name__})"
    if r.get("vocab") != stem:
        return f"a result for {r.get('vocab')!r}, not {stem!r}"
    if r.get("notebook") not in (None, analysis):
        return f"a {r.get('notebook')!r} result filed under {analysis!r}"
    schema = SCHEMAS.get(analysis)
    if schema is None:
        return ""
    for key, kind in schema.keys.items():
        if key not in r:
            return f"missing {key!r}"
        if not isinstance(r[key], kind) or isinstance(r[key], bool) and kind in (int, float):
            return f"{key!r} is a {type(r[key]).__name__}"
    for key, cols in schema.tables.items():
        rows = r[key] if isinstance(r[key], list) else [r[key]]
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                return f"{key}[{i}] is not a row"
            missing = [c for c in cols if c not in row and not (key == "rows" and "build_error" in row)]
            if missing:
                return f"{key}[{i}] has no {missing[0]!r}"
    return ""


def load(results: Path, analysis: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(usable results, failed inputs) of one analysis, each sorted by vocab.

    A failed input is `{"notebook", "vocab", "error"}`, the error in one line.
    """
    ok, failed = [], []
    for p in sorted((results / analysis).glob("*.json")):
        try:
            r = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as e:
            failed.append({"notebook": analysis, "vocab": p.stem, "error": f"unreadable result: {type(e).__name__}: {e}"})
            continue
        if isinstance(r, dict) and r.get("status") not in (None, "ok"):
            failed.append({"notebook": analysis, "vocab": p.stem, "error": str(r.get("error") or "failed"), **({"log": r["log"]} if "log" in r else {})})
            continue
        why = check(analysis, p.stem, r)
        if why:
            failed.append({"notebook": analysis, "vocab": p.stem, "error": f"unusable result: {why}"})
        else:
            ok.append(r)
    return ok, failed


__all__ = ["SCHEMAS", "Schema", "check", "load"]
