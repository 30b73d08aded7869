"""The contract between the analyses and the report: what a result file holds, and its one loader.

Each (analysis, vocab) run writes `data/results/ANALYSIS/VOCAB.json` (`nb.write_result`, or
`run.execute` for a failure). `SCHEMAS` says, per analysis, which keys an `ok` result carries and
of which JSON type, and which columns every row of its tables has. `load` is the only way the
report reads results: a file that is not JSON, not a result, of another vocab, or that lacks a
key becomes a failed input with that cause in one line, so one bad file never costs the report.

Each result also records what produced it (`provenance`: the analysis, its parameters, each
input file's sha256, the code version), and `load` uses a result only while that still holds: a
result whose input changed since it ran is stale (a failed input, one line), and in the main
results (`data/results`) so is one made with other settings than the defaults (`params.changed`).
A result whose input file is gone is left out of the report, and `dropped` says so in one line
each.

Cost: reading and checking a result is a json.loads; each input file is hashed once per process
(the 19 fixtures, 75 MB, in well under a second).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .paths import DATA, RESULTS, ROOT, vocab_path

# where a run with non-default settings goes (never the main results)
BYHAND = DATA / "byhand"
# what an analysis's result depends on: the code version a result records is their hash with its
# notebook's. The one list: the Makefile reads it (`python -m llgbridge.results --make`)
CORE = ("__init__.py", "llg.py", "vocab.py", "gguf_meta.py", "errors.py", "paths.py", "bridges.py", "sentinel.py",
        "probe.py", "grammars.py", "guide.py", "nb.py", "show.py", "results.py", "params.py")
MODULES: dict[str, tuple[str, ...]] = {
    "census": ("census.py",), "leak": ("masks.py",), "forced": ("masks.py",), "probe": (),
    "exactness": ("exactness.py", "fixtures.py"), "soundness": ("soundness.py",),
    "matrix": ("generate.py", "synth.py", "models.py"), "native": ("native.py", "soundness.py", "fixtures.py"),
    "corpus": ("corpus.py", "cluster.py", "schemas.py", "schemas.tsv", "soundness.py", "fixtures.py"),
    "server": ("serving.py", "server.py", "generate.py", "synth.py", "models.py"),
}
# the compiled programs a result ran, by directory and glob: their bytes are part of its code
# version, so a rebuilt binary (a changed harness, a patch, another llguidance) makes it stale
BUILT: dict[str, tuple[tuple[str, str], ...]] = {
    "native": (("data/native/bin", "*"),),
    "server": (("data/native/server/bin", "*"),),
}


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
    "server": Schema({"rows": list, "tokens": list, "load": list, "llguidance": list, "port_llguidance": str, "builds": dict,
                      "cases": dict, "temperature": (int, float), "seed": int},  # type: ignore[dict-item]
                     {"rows": ("model", "vocab", "llguidance", "sampler", "case", "http_status", "error_field", "outcome"),
                      "load": ("model", "llguidance", "sampler", "requests", "violations", "healthy_after")}),
    "matrix": Schema({"rows": list, "device": str, "n_gpu_layers": int, "temperature": (int, float), "seed": int,  # type: ignore[dict-item]
                      "max_tokens": int}, {"rows": ("model", "vocab", "case", "bridge", "outcome")}),
    "exactness": Schema({"n_inputs": int, "bridges": list, "exactness": list, "probe_vs_exactness": dict},
                        {"bridges": _BRIDGE_ROW, "exactness": _BRIDGE_ROW, "probe_vs_exactness": ("vocab", "cell")}),
    "soundness": Schema({"soundness": list}, {"soundness": _BRIDGE_ROW}),
    "corpus": Schema({"schemas": int, "params": dict, "rows": list, "failures": list, "rejected": list, "timing": list, "hist": dict,
                      "hist_edges_us": list},
                     {"rows": (*_BRIDGE_ROW, "schemas", "compiled", "under", "over"), "failures": (*_BRIDGE_ROW, "schema", "status"),
                      "rejected": ("schema", "status", "error", "vocabs", "bridges"),
                      "timing": (*_BRIDGE_ROW, "masks", "mask_us_p50", "mask_us_p99")}),
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


def _shown(p: Path) -> str:
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)


_SHA: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _SHA:
        from .fixtures import sha256  # not a CORE module: imported only when a file is hashed

        _SHA[key] = sha256(path)
    return _SHA[key]


# every analysis's code version, taken once per process, the first time one is asked for: a
# long-lived kernel keeps the modules it imported, so a file edited while it runs must not be
# claimed by results it computes with the old module. Taken early, the version a result records
# is never newer than the code that made it (a module first imported after an edit makes the
# result look older than it is: it is run again, the safe way round)
_VERSIONS: dict[str, str] = {}


def code_version(analysis: str) -> str:
    """A hash of the notebook, of every module its result depends on and of the binaries it ran
    (`BUILT`, by their sha256) (16 hex digits), as the files were when this process first asked."""
    if not _VERSIONS:
        notebooks = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
        _VERSIONS.update({a: _code_version(a) for a in {*notebooks, *MODULES}})
    if analysis not in _VERSIONS:
        _VERSIONS[analysis] = _code_version(analysis)
    return _VERSIONS[analysis]


def _code_version(analysis: str) -> str:
    h = hashlib.sha256()
    lib = Path(__file__).parent
    for f in [ROOT / "notebooks" / f"{analysis}.ipynb", *(lib / m for m in (*CORE, *MODULES.get(analysis, ())))]:
        h.update(f.name.encode() + b"\0" + (f.read_bytes() if f.exists() else b"(missing)") + b"\0")
    for folder, pattern in BUILT.get(analysis, ()):
        for f in sorted((ROOT / folder).glob(pattern)):
            if f.is_file():
                h.update(f.name.encode() + b"\0" + file_sha256(f).encode() + b"\0")
    return h.hexdigest()[:16]


def input_files(params: dict[str, Any]) -> list[Path]:
    """The files a run with `params` reads: its models, else its vocab_path, else its fixture."""
    if params.get("models"):
        return [_resolve(m) for m in params["models"]]
    if params.get("vocab_path"):
        return [_resolve(params["vocab_path"])]
    return [vocab_path(str(params.get("vocab")))]


def _resolve(p: str) -> Path:
    q = Path(p)
    return q if q.is_absolute() else ROOT / q


def provenance(analysis: str, params: dict[str, Any]) -> dict[str, Any]:
    """What produced a result: the analysis, its parameters, its inputs' sha256, the code version."""
    inputs = [{"path": _shown(f), "sha256": file_sha256(f) if f.is_file() else None} for f in input_files(params)]
    return {"analysis": analysis, "params": {k: v for k, v in params.items() if k != "results_dir"},
            "inputs": inputs, "code": code_version(analysis)}


def _main(results: Path) -> bool:
    return results.resolve() == RESULTS.resolve()


def _gone(results: Path, stem: str, r: Any) -> str:
    """The input file of result `r` that no longer exists, or ""."""
    prov = r.get("provenance") if isinstance(r, dict) else None
    if isinstance(prov, dict) and isinstance(prov.get("inputs"), list):
        paths = [_resolve(str(i.get("path"))) for i in prov["inputs"] if isinstance(i, dict)]
    elif _main(results):
        paths = [vocab_path(stem)]
    else:
        return ""
    return next((_shown(p) for p in paths if not p.exists()), "")


def why_stale(results: Path, analysis: str, r: dict[str, Any]) -> str:
    """Why an ok, well-formed result no longer stands for what `make report` would compute now, or
    "" when it does: the one judge of "current", for the planner (`batch.out_of_date`) and the
    report (`load`) alike. A result is current only when its recorded provenance says so: the code
    version (notebook, modules, the binaries it ran), the input files (this result's own, and
    their bytes), and, in the main results, the default parameters."""
    from . import params as P

    prov = r.get("provenance")
    if not isinstance(prov, dict):
        return "records no provenance"
    if prov.get("code") != code_version(analysis):
        return "its code changed"
    recorded = [_resolve(str(i.get("path"))) for i in prov.get("inputs") or [] if isinstance(i, dict)]
    params = prov.get("params") if isinstance(prov.get("params"), dict) else {}
    expected = input_files({**params, "vocab": r.get("vocab")})
    if [p.resolve() for p in recorded] != [p.resolve() for p in expected]:
        # a result copied or renamed onto another input: it measured the file it names, not this one
        return (f"it was made from {', '.join(_shown(p) for p in recorded) or 'no input'}, not from "
                f"{', '.join(_shown(p) for p in expected)}")
    for i in prov.get("inputs") or []:
        p = _resolve(str(i.get("path")))
        if p.is_file() and i.get("sha256") != file_sha256(p):
            return f"its input {_shown(p)} changed since it ran"
    if _main(results):
        try:
            changed = P.changed(analysis, params)
        except Exception as e:  # noqa: BLE001 - a notebook that cannot be read makes no result usable
            return f"cannot compare its parameters: {type(e).__name__}: {e}"
        if changed:
            shown = ", ".join(f"{k}={v!r:.40}" for k, v in changed.items())
            return f"made with non-default parameters ({shown}), which the main report does not take"
    return ""


def _stale(results: Path, analysis: str, r: dict[str, Any]) -> str:
    """`why_stale` as the report says it, or "" when the result is current."""
    if not isinstance(r.get("provenance"), dict):
        # written before results recorded provenance: `make report` reruns it; until then it stands
        return ""
    why = why_stale(results, analysis, r)
    return f"stale result: {why}; make report reruns it" if why else ""


def load(results: Path, analysis: str, gone: list[str] | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(usable results, failed inputs) of one analysis, each sorted by vocab; results whose input
    is gone are in neither: `gone`, when given, gets one line for each (as `dropped` says it).

    A failed input is `{"notebook", "vocab", "error"}`, the error in one line.
    """
    ok, failed = [], []
    for p in sorted((results / analysis).glob("*.json")):
        try:
            r = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as e:
            failed.append({"notebook": analysis, "vocab": p.stem, "error": f"unreadable result: {type(e).__name__}: {e}"})
            continue
        lost = _gone(results, p.stem, r)
        if lost:
            if gone is not None:
                gone.append(f"{analysis}/{p.stem}: left out, its input {lost} is gone")
            continue
        if isinstance(r, dict) and r.get("status") not in (None, "ok"):
            failed.append({"notebook": analysis, "vocab": p.stem, "error": str(r.get("error") or "failed"), **({"log": r["log"]} if "log" in r else {})})
            continue
        why = check(analysis, p.stem, r) or _stale(results, analysis, r)
        if why:
            failed.append({"notebook": analysis, "vocab": p.stem, "error": why if why.startswith("stale") else f"unusable result: {why}"})
        else:
            ok.append(r)
    return ok, failed


def dropped(results: Path) -> list[str]:
    """One line per result left out because its input file is gone."""
    out: list[str] = []
    for analysis in SCHEMAS:
        load(results, analysis, out)
    return out


def make_lists() -> str:
    """The lists for the Makefile, one word each: `core/FILE` for CORE, `ANALYSIS/FILE` for its
    MODULES (stdlib only: Make reads this while it parses, before the venv exists)."""
    words = [f"core/{m}" for m in CORE]
    words += [f"{a}/{m}" for a, mods in MODULES.items() for m in mods]
    return " ".join(words)


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["--make"]:
        raise SystemExit("usage: python -m llgbridge.results --make")
    print(make_lists())


__all__ = ["BYHAND", "SCHEMAS", "Schema", "check", "code_version", "dropped", "load", "provenance"]
