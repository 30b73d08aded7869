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
from pathlib import Path
from typing import Any

from . import loaded
from . import params as P
from .analyses import ANALYSES, BY_NAME, Kind, Schema
from .errors import InputError
from .inputs import Input
from .paths import DATA, RESULTS, ROOT, resolve, vocab_path

# where a run with non-default settings goes (never the main results)
BYHAND = DATA / "byhand"
# what every analysis's result depends on; each analysis adds its own modules and compiled
# programs (`analyses.ANALYSES`): the code version a result records is their hash with its
# notebook's (`code_files`). The one list: the pool judges "current" by it, and nothing else keeps
# one (tests/test_pipeline.py checks that it holds every module an analysis's notebook imports,
# and that the Makefile lists none). A name ending in "/" is every module of that subpackage.
SHARED_CODE = (
    "__init__.py",
    "llg.py",
    "vocab.py",
    "_llamacall.c",
    "gguf_meta.py",
    "modelfile.py",
    "errors.py",
    "paths.py",
    "bridges.py",
    "probe.py",
    "grammars.py",
    "guide.py",
    "nb.py",
    "show.py",
    "results.py",
    "analyses/__init__.py",
    "analyses/registry.py",
    "candidates.py",
    "catalogue.py",
    "params.py",
    "fixtures.py",
    "models.py",
    "fetch.py",
    "loaded.py",
    "overrides.py",
    "inputs.py",
)
MODULES: dict[str, tuple[str, ...]] = {a.name: a.modules for a in ANALYSES}
PACKAGES: dict[str, tuple[str, ...]] = {a.name: a.packages for a in ANALYSES}
# modules a notebook imports only to draw (colours): no result depends on them, so a new colour
# reruns nothing; the code-version test allows these and no others outside the lists above
DISPLAY_ONLY = ("palette.py",)
BUILT: dict[str, tuple[tuple[str, str], ...]] = {a.name: a.built for a in ANALYSES if a.built}
# what an ok result of each analysis holds, derived from its entry's result type (`Schema.of`)
SCHEMAS: dict[str, Schema] = {a.name: a.schema for a in ANALYSES}


def _is(value: Any, kind: Kind) -> bool:
    """`isinstance`, as JSON means it: true and false are not numbers."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool):
        return bool in kinds
    return isinstance(value, kinds)


def _kind_name(kind: Kind) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join("null" if k is type(None) else k.__name__ for k in kinds)


def _mistyped(field: str, value: Any, kind: Kind, path: str) -> str:
    """One line naming the file, the field, the type it has and the type it should have."""
    where = f"{path}: " if path else ""
    return f"{where}{field} is {_kind_name(type(value))} ({json.dumps(value)[:40]}), expected {_kind_name(kind)}"


def why_unusable(analysis: str, stem: str, r: Any, path: str = "") -> str:
    """Why result `r` (from file `stem`.json, shown as `path` where given) cannot be used, or ""
    when it can. A field of the wrong type is refused here, for this one file, before the report
    computes with it (where it would cost the whole section)."""
    if not isinstance(r, dict):
        return f"not a result object (a JSON {type(r).__name__})"
    if r.get("vocab") != stem:
        return f"a result for {r.get('vocab')!r}, not {stem!r}"
    if r.get("notebook") not in (None, analysis):
        return f"a {r.get('notebook')!r} result filed under {analysis!r}"
    schema = SCHEMAS.get(analysis)
    if schema is None:  # a result of no analysis in the registry cannot be checked, so not used
        return f"{analysis!r} is no analysis of the registry (analyses.py)"
    for key, kind in schema.keys.items():
        if key not in r:
            return f"missing {key!r}"
        if not _is(r[key], kind):
            return _mistyped(key, r[key], kind, path)
    for key, cols in schema.tables.items():
        if why := _table_problem(key, r[key], cols, path):
            return why
    return ""


def _table_problem(key: str, table: Any, cols: dict[str, Kind], path: str) -> str:
    """Why the result's table `key` (a list of rows, or one row) does not hold the columns `cols`
    of their kinds, or ""."""
    one = not isinstance(table, list)
    rows = [table] if one else table
    for i, row in enumerate(rows):
        at = key if one else f"{key}[{i}]"
        if not isinstance(row, dict):
            return f"{at} is not a row"
        missing = [c for c in cols if c not in row and not (key == "rows" and "build_error" in row)]
        if missing:
            return f"{at} has no {missing[0]!r}"
        for c, kind in cols.items():
            if c in row and not _is(row[c], kind):
                return _mistyped(f"{at}.{c}", row[c], kind, path)
    return ""


def _relative(p: Path) -> str:
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)


_SHA: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _SHA:
        _SHA[key] = loaded.sha256(path)
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
        _VERSIONS.update({a: _code_version(a) for a in MODULES})
    if analysis not in _VERSIONS:
        _VERSIONS[analysis] = _code_version(analysis)
    return _VERSIONS[analysis]


def _imported(source: str, package: tuple[str, ...]) -> set[Path]:
    """The llgbridge modules `source` (in subpackage `package`) imports, at the top or inside a
    function, as files."""
    import ast

    lib = Path(__file__).parent
    found: set[Path] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("llgbridge")):
            base = (
                [*package[: len(package) - node.level + 1], *(node.module or "").split(".")]
                if node.level
                else (node.module or "").split(".")[1:]
            )
            base = [p for p in base if p]
            candidates = [base, *([*base, a.name] for a in node.names)]
        elif isinstance(node, ast.Import):
            candidates = [a.name.split(".")[1:] for a in node.names if a.name.startswith("llgbridge.")]
        else:
            continue
        for parts in candidates:
            f = lib.joinpath(*parts)
            if parts and f.with_suffix(".py").is_file():
                found.add(f.with_suffix(".py"))
            elif parts and f.with_suffix(".c").is_file():  # a compiled module: its source is what changes
                found.add(f.with_suffix(".c"))
            elif (f / "__init__.py").is_file():
                found.add(f / "__init__.py")
    return found


def import_closure(files: list[Path], source: str = "") -> set[Path]:
    """`files` (llgbridge modules) and every llgbridge module they reach through imports, lazy
    ones included; `source` is more code to start from (a notebook's cells)."""
    lib = Path(__file__).parent
    todo = [*files, *(_imported(source, ()) if source else ())]
    seen: set[Path] = set()
    while todo:
        f = todo.pop()
        if f not in seen:
            seen.add(f)
            if f.suffix == ".py":
                todo += _imported(f.read_text(encoding="utf-8"), f.relative_to(lib).parent.parts)
    return seen


def _own_code(folder: Path) -> list[Path]:
    """An analysis package's modules, its section left out: the page's code reruns nothing."""
    return sorted(f for f in folder.rglob("*.py") if f.name != "section.py" and "__pycache__" not in f.parts)


def code_files(analysis: str) -> list[Path]:
    """The source files `analysis`'s code version hashes: its notebook, SHARED_CODE, its package's
    own modules and its MODULES."""
    lib = Path(__file__).parent
    entry = BY_NAME.get(analysis)
    files = [P.notebook_file(analysis)]
    for m in (*SHARED_CODE, *MODULES.get(analysis, ())):
        if m.endswith("/"):  # a subpackage's modules; an analysis's section is the page's, not its result's
            files += [f for f in sorted((lib / m).glob("*.py")) if f.name != "section.py"]
        else:
            files += sorted(lib.glob(m)) if "*" in m else [lib / m]
    if entry and entry.folder.is_dir():
        files += [f for f in _own_code(entry.folder) if f not in files]
    return files


def _named(f: Path) -> str:
    """A hashed file's name: from the repository's root, or from its package's parent for an
    analysis that lives outside it (`analyses.EXTRA`)."""
    for base in (ROOT, *(a.folder.parent for a in ANALYSES)):
        if f.is_relative_to(base):
            return str(f.relative_to(base))
    return f.name


def _code_version(analysis: str) -> str:
    h = hashlib.sha256()
    for f in code_files(analysis):
        h.update(_named(f).encode() + b"\0" + (f.read_bytes() if f.exists() else b"(missing)") + b"\0")
    for folder, pattern in BUILT.get(analysis, ()):
        for f in sorted((ROOT / folder).glob(pattern)):
            if f.is_file():
                h.update(f.name.encode() + b"\0" + file_sha256(f).encode() + b"\0")
    return h.hexdigest()[:16]


# what a result is computed with besides this suite's code (issue 48, break 2): the packages the
# analyses drive, the llama.cpp tree llama-cpp-python vendors (the commit `native.builder` reads
# from its sdist, in this file; results.py may not import native/, which no analysis but native
# and server depends on) and the PR under test (its patches, by sha256). Every result records
# them; one made with others is stale, and the page says only what the results record
VERSIONED_PACKAGES = ("llguidance", "llama-cpp-python", "gguf")
LLAMA_CPP_COMMIT = DATA / "native" / "src" / "shipped" / "LLAMA_CPP_COMMIT"
PATCHES = ROOT / "patches"
_RUN_VERSIONS: dict[str, str] = {}


def run_versions(analysis: str = "") -> dict[str, str]:
    """The versions this process computes with (taken once, the first time one is asked for, as
    `code_version` is): each of `VERSIONED_PACKAGES` and of `analysis`'s own packages as
    installed, `llama.cpp` (the vendored commit, "" before `make native` extracted it) and
    `patches` (the sha256 of patches/, the candidates' included, 16 hex digits)."""
    from importlib import metadata

    for pkg in PACKAGES.get(analysis, ()):
        if pkg not in _RUN_VERSIONS:
            try:
                _RUN_VERSIONS[pkg] = metadata.version(pkg)
            except metadata.PackageNotFoundError:
                _RUN_VERSIONS[pkg] = ""
    if "llguidance" not in _RUN_VERSIONS:
        for pkg in VERSIONED_PACKAGES:
            try:
                _RUN_VERSIONS[pkg] = metadata.version(pkg)
            except metadata.PackageNotFoundError:
                _RUN_VERSIONS[pkg] = ""
        try:
            _RUN_VERSIONS["llama.cpp"] = LLAMA_CPP_COMMIT.read_text(encoding="utf-8").strip()
        except OSError:
            _RUN_VERSIONS["llama.cpp"] = ""
        h = hashlib.sha256()
        for f in sorted(PATCHES.rglob("*.patch")):
            h.update(str(f.relative_to(PATCHES)).encode() + b"\0" + f.read_bytes() + b"\0")
        _RUN_VERSIONS["patches"] = h.hexdigest()[:16]
    return {k: _RUN_VERSIONS[k] for k in (*VERSIONED_PACKAGES, "llama.cpp", "patches", *PACKAGES.get(analysis, ()))}


def versions_problem(recorded: Any, analysis: str = "") -> str:
    """Why a result of `analysis` that records `recorded` (its provenance's versions) was made with
    other versions than this process's (`run_versions`), or "" when they are the same."""
    if not isinstance(recorded, dict):
        return "it records no versions (llguidance, llama-cpp-python, gguf, llama.cpp, the patches)"
    now = run_versions(analysis)
    moved = [k for k in now if recorded.get(k) != now[k]]
    return "; ".join(
        f"it was made with {k} {recorded.get(k) or '(none)'}, and {k} is {now[k] or '(none)'} now" for k in moved
    )


def recorded_versions(rs: list[dict[str, Any]]) -> dict[str, str]:
    """The versions the results `rs` record (their provenance), each key's values joined where
    they differ, "not recorded" where none records it: what a page says it ran on."""
    out = {}
    for k in (*VERSIONED_PACKAGES, "llama.cpp", "patches"):
        seen = sorted(
            {
                str(v)
                for r in rs
                if isinstance(r.get("provenance"), dict)
                and isinstance(r["provenance"].get("versions"), dict)
                and (v := r["provenance"]["versions"].get(k))
            }
        )
        out[k] = " and ".join(seen) or "not recorded"
    return out


def port_llguidance(rs: list[dict[str, Any]]) -> str:
    """The llguidance the port ran on in the results `rs` (what their provenance records), "" where
    none records it: never the installed one, which may have changed since they ran."""
    said = recorded_versions(rs)["llguidance"]
    return "" if said == "not recorded" else said


def run_input(params: dict[str, Any], name: object = None) -> Input:
    """The input a run with `params` read (`Input.param`, as `params.check` records it), under
    `name` when given (a result's own: the one it stands for)."""
    it = Input.from_param(params.get("input") or name)
    return it.renamed(name) if isinstance(name, str) and name != it.name else it


def _input_sha256(f: Path) -> str | None:
    """The sha256 `f` had when this process loaded it (`loaded`), which must still be its sha256
    now: a result computed from bytes that are gone would otherwise stand as current for the new
    ones. None for a file that is not there."""
    if not f.is_file():
        return None
    now = file_sha256(f)
    then = loaded.at_load(f)
    if then is not None and then != now:
        raise InputError(
            f,
            f"changed while the analysis ran (sha256 {then[:12]}… when loaded, {now[:12]}… now): its result is not "
            f"written; run it again",
        )
    return now


def provenance(analysis: str, params: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    """What produced a result: the analysis, its parameters, its inputs' sha256 (as loaded), the
    key overrides they were loaded with (part of the input: the same file without them is another
    input), the code version, and the versions it was computed with (`run_versions`)."""
    it = run_input(params, name)
    inputs = [{"path": _relative(f), "sha256": _input_sha256(f)} for f in it.files()]
    return {
        "analysis": analysis,
        "params": {k: v for k, v in params.items() if k != "results_dir"},
        "inputs": inputs,
        "overrides": it.load_texts(),
        "code": code_version(analysis),
        "versions": run_versions(analysis),
    }


def overrides_problem(recorded: Any, expected: list[str]) -> str:
    """Why a result loaded with the `recorded` overrides does not stand for an input loaded with
    `expected`, or "" when they are the same."""
    rec = [str(x) for x in recorded] if isinstance(recorded, list) else []
    if rec == expected:
        return ""
    if not rec:
        return f"it was made without the override {', '.join(expected)}, which this input is loaded with"
    if not expected:
        return f"it was made with the override {', '.join(rec)}, which this input is not loaded with"
    return f"it was made with the overrides {', '.join(rec)}, and this input is loaded with {', '.join(expected)}"


# the key each result carries its own digest under (`digest`): what its run wrote, so a value
# edited by hand afterwards (a census's `differing` set to 4242, the rest left as it was) is told
# from a run's result and never published (issue 58, 12)
DIGEST = "digest"


def digest(r: dict[str, Any]) -> str:
    """The sha256 of result `r`'s content, its own digest left out: its keys sorted and written as
    JSON in one spelling, so the same values give the same digest however the file was laid out."""
    body = {k: v for k, v in r.items() if k != DIGEST}
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def digest_problem(r: dict[str, Any]) -> str:
    """Why result `r`'s content is not what its run wrote (`digest`), or "" when it is."""
    said = r.get(DIGEST)
    if not isinstance(said, str):
        return "it records no digest of its content (written before results did, or edited by hand)"
    if said != digest(r):
        return "its content changed since its run wrote it (it no longer matches its digest: edited by hand?)"
    return ""


def _main(results: Path) -> bool:
    return results.resolve() == RESULTS.resolve()


def _gone(results: Path, stem: str, r: Any) -> str:
    """The input file of result `r` that no longer exists, or ""."""
    prov = r.get("provenance") if isinstance(r, dict) else None
    if isinstance(prov, dict) and isinstance(prov.get("inputs"), list):
        paths = [resolve(str(i.get("path"))) for i in prov["inputs"] if isinstance(i, dict)]
    elif _main(results):
        paths = [vocab_path(stem)]
    else:
        return ""
    return next((_relative(p) for p in paths if not p.exists()), "")


def _input_problem(results: Path, prov: dict[str, Any], params: dict[str, Any], name: object) -> str:
    """Why the input files and overrides a result's provenance `prov` records are not those of the
    input it names (`name`), or "" when they are."""
    recorded = [resolve(str(i.get("path"))) for i in prov.get("inputs") or [] if isinstance(i, dict)]
    try:
        it = run_input(params, name)
        if _main(results) and not str(name).startswith("model-"):
            # in the main results a result is the input it names: its name's own file and overrides,
            # never what its own record says it ran on (that always agrees with itself: a run of
            # gpt-2's file under the name llama-spm was current as llama-spm, issue 58, 1); a model
            # file given to make matrix is named after its file, so it is its own record's
            it = Input.from_param(name)
    except ValueError as e:  # an input this code refuses (an override among them): no result stands on it
        return f"its input cannot be used: {e}"
    expected = it.files()
    if [p.resolve() for p in recorded] != [p.resolve() for p in expected]:
        # a result copied or renamed onto another input: it measured the file it names, not this one
        return (
            f"it was made from {', '.join(_relative(p) for p in recorded) or 'no input'}, not from "
            f"{', '.join(_relative(p) for p in expected)}"
        )
    # the same file loaded with other key overrides is another input (the plain Gemma 3 and
    # gemma3-270m+space-prefix share one file)
    return overrides_problem(prov.get("overrides", []), it.load_texts())


def why_stale(results: Path, analysis: str, r: dict[str, Any]) -> str:
    """Why an ok, well-formed result no longer stands for what `make report` would compute now, or
    "" when it does: the one judge of "current", for the planner (`batch.out_of_date`) and the
    report (`load`) alike. A result is current only when its recorded provenance says so: the code
    version (notebook, modules, the binaries it ran), the versions it was computed with
    (`run_versions`: llguidance, llama-cpp-python, gguf, llama.cpp, the patches), the input files
    (in the main results its name's own, and their bytes, and the key overrides they were loaded
    with), in the main results the default parameters, and its content (`digest`)."""
    prov = r.get("provenance")
    if not isinstance(prov, dict):
        return "records no provenance"
    if prov.get("code") != code_version(analysis):
        return "its code changed"
    if why := versions_problem(prov.get("versions"), analysis):
        return why
    params: dict[str, Any] = prov["params"] if isinstance(prov.get("params"), dict) else {}
    if why := _input_problem(results, prov, params, r.get("vocab")):
        return why
    for i in prov.get("inputs") or []:
        p = resolve(str(i.get("path")))
        if p.is_file() and i.get("sha256") != file_sha256(p):
            return f"its input {_relative(p)} changed since it ran"
    if _main(results):
        try:
            changed = P.changed(analysis, params)
        except Exception as e:  # noqa: BLE001 - a notebook that cannot be read makes no result usable
            return f"cannot compare its parameters: {type(e).__name__}: {e}"
        if changed:
            shown = ", ".join(f"{k}={v!r:.40}" for k, v in changed.items())
            return f"made with non-default parameters ({shown}), which the main report does not take"
    # last: a result copied onto another input fails its digest too, and is better told by where it came from
    return digest_problem(r)


def _stale(results: Path, analysis: str, r: dict[str, Any]) -> str:
    """`why_stale` as the report says it, or "" when the result is current."""
    if not isinstance(r.get("provenance"), dict) and not _main(results):
        # written before results recorded provenance (or by a test, with none): it stands, unless
        # it carries a digest its content no longer matches. The main report takes none such: the
        # pool reruns it
        why = digest_problem(r) if DIGEST in r else ""
        return f"stale result: {why}; make report reruns it" if why else ""
    why = why_stale(results, analysis, r)
    return f"stale result: {why}; make report reruns it" if why else ""


def load(
    results: Path, analysis: str, gone: list[str] | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(usable results, failed inputs) of one analysis, each sorted by vocab; results whose input
    is gone are in neither: `gone`, when given, gets one line for each (as `dropped` says it).

    A failed input is `{"notebook", "vocab", "error"}`, the error in one line.
    """
    ok, failed = [], []
    for p in sorted((results / analysis).glob("*.json")):
        try:
            r = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as e:
            failed.append(
                {"notebook": analysis, "vocab": p.stem, "error": f"unreadable result: {type(e).__name__}: {e}"}
            )
            continue
        # a failed run is read as failed before its input is looked for: a run on a name no input
        # holds fails because its file is not there, and taking that for "its input is gone" left
        # every failure of a mistyped input out of the report, which then published nothing as
        # complete
        if isinstance(r, dict) and r.get("status") not in (None, "ok"):
            failed.append(
                {
                    "notebook": analysis,
                    "vocab": p.stem,
                    "error": str(r.get("error") or "failed"),
                    **({"log": r["log"]} if "log" in r else {}),
                }
            )
            continue
        lost = _gone(results, p.stem, r)
        if lost:
            if gone is not None:
                gone.append(f"{analysis}/{p.stem}: left out, its input {lost} is gone")
            continue
        why = why_unusable(analysis, p.stem, r, _relative(p)) or _stale(results, analysis, r)
        if why:
            failed.append(
                {
                    "notebook": analysis,
                    "vocab": p.stem,
                    "error": why if why.startswith("stale") else f"unusable result: {why}",
                }
            )
        else:
            ok.append(r)
    return ok, failed


def dropped(results: Path) -> list[str]:
    """One line per result left out because its input file is gone."""
    out: list[str] = []
    for analysis in SCHEMAS:
        load(results, analysis, out)
    return out


__all__ = [
    "BYHAND",
    "SCHEMAS",
    "Schema",
    "code_files",
    "code_version",
    "digest",
    "digest_problem",
    "dropped",
    "load",
    "port_llguidance",
    "provenance",
    "recorded_versions",
    "run_versions",
    "versions_problem",
    "why_unusable",
]
