"""The analyses: one entry each, and the one list every other place reads.

An analysis is a notebook (`notebooks/NAME.ipynb`) that calls the library and writes one result
per input (`data/results/NAME/INPUT.json`). Its entry says what the result's code version hashes
(`modules`, beside `results.SHARED_CODE`, and the compiled programs it ran, `built`), what an `ok` result
holds (`schema`, which `results.load` checks before the report reads it), which inputs
`make report` runs it on (`runs_on`: a set the Makefile names, see INPUT_SETS) and whether
`make whatif` runs it on a new file. The report's section for it is `report/NAME.py`'s
`NAME_section`, in the order of `PAGE`.

Adding an analysis touches this file, its module(s), its notebook, its section and its test, and
nothing else: the pool, the Makefile's report target, the what-if, the report and the tests read
the list here (tests/test_pipeline.py checks it against `notebooks/` and `report/`).

Standard library only: the Makefile's helpers import it before the venv exists.
"""

from __future__ import annotations

from dataclasses import dataclass

Kind = type | tuple[type, ...]  # a JSON type, or several (`isinstance`'s second argument)


@dataclass(frozen=True)
class Schema:
    keys: dict[str, Kind]  # top-level key -> JSON type (list, dict, str, int, float)
    tables: dict[
        str, dict[str, Kind]
    ]  # key holding a list of rows (or one row) -> column each row has -> its JSON type


_NUM = (int, float)
_BRIDGE_ROW: dict[str, Kind] = {"vocab": str, "bridge": str}
_MS = (int, float, type(None))  # a timing: none where nothing was timed
_BLANK_INT = (int, str)  # a count, or "" where it was not measured (the native differential that did not run)

# the inputs `make report` runs an analysis on, as the Makefile passes them to the pool
INPUT_SETS = {
    "every": "every fixture and every real model's vocab",
    "matrix": "the synthetic models made from MATRIX_VOCABS' tokenizers, and the real models",
    "server": "the matrix's models, through the real llama-server",
    "corpus-sample": "the corpus's seeded sample of schemas, on CORPUS_SAMPLE_VOCABS",
}


@dataclass(frozen=True)
class Analysis:
    name: str  # its notebook's and its results folder's name
    # what its result depends on beyond results.SHARED_CODE: the code version a result records is their
    # hash with its notebook's; a name ending in "/" is every module of that subpackage
    modules: tuple[str, ...]
    schema: Schema
    runs_on: str  # a key of INPUT_SETS
    whatif: bool  # `make whatif` runs it on a new file
    # the compiled programs (or data) a result ran, by directory and glob: their bytes are part of
    # its code version, so a rebuilt binary (a changed harness, a patch, another llguidance) or an
    # edited corpus schema makes it stale
    built: tuple[tuple[str, str], ...] = ()
    # the libraries it drives beyond results.VERSIONED_PACKAGES (the engines'): their installed
    # versions are recorded with its results, and another version makes them stale
    packages: tuple[str, ...] = ()


# in the order a worker runs an input's analyses (the page's order is PAGE)
ANALYSES: tuple[Analysis, ...] = (
    Analysis(
        "census",
        ("census.py",),
        Schema(
            {"summary": dict, "diffs": list},
            {"summary": {"vocab": str, "differing": int, "n_tokens": int, "lost_leading_space": int}},
        ),
        runs_on="every",
        whatif=True,
    ),
    Analysis(
        "leak",
        ("leak.py",),
        Schema({"grammar": str, "rows": list, "leaked": dict}, {"rows": _BRIDGE_ROW}),
        runs_on="every",
        whatif=True,
    ),
    Analysis(
        "forced",
        ("forced.py",),
        Schema({"literal": str, "rows": list}, {"rows": _BRIDGE_ROW}),
        runs_on="every",
        whatif=True,
    ),
    Analysis(
        "engines",
        ("engines.py", "adapters/"),
        Schema(
            {"rows": list, "examples": dict, "seconds": dict, "limit_s": _NUM},
            {"rows": {"vocab": str, "engine": str, "version": str}},
        ),
        runs_on="every",
        whatif=True,
        packages=("lm-format-enforcer", "outlines", "outlines-core"),
    ),
    Analysis(
        "probe",
        (),
        Schema({"probe": dict, "cases": list}, {"probe": {"vocab": str, "tokenize_exact": bool, "greedy": bool}}),
        runs_on="every",
        whatif=True,
    ),
    Analysis(
        "exactness",
        ("exactness.py",),
        Schema(
            {"n_inputs": int, "bridges": list, "exactness": list, "probe_vs_exactness": dict},
            {"bridges": _BRIDGE_ROW, "exactness": _BRIDGE_ROW, "probe_vs_exactness": {"vocab": str, "cell": str}},
        ),
        runs_on="every",
        whatif=True,
    ),
    Analysis(
        "soundness",
        ("soundness.py",),
        Schema({"soundness": list}, {"soundness": _BRIDGE_ROW}),
        runs_on="every",
        whatif=True,
    ),
    Analysis(
        "native",
        ("native/", "soundness.py"),
        Schema(
            {"rows": list, "differences": list, "tests": list},
            {"rows": {"vocab": str, "sampler": str, "diff_cells": _BLANK_INT, "diff_differ": _BLANK_INT}},
        ),
        runs_on="every",
        whatif=True,
        built=(("data/native/bin", "*"),),
    ),
    Analysis(
        "matrix",
        ("matrix.py", "generate.py", "synth.py"),
        Schema(
            {"rows": list, "device": str, "n_gpu_layers": int, "temperature": _NUM, "seed": int, "max_tokens": int},
            {"rows": {"model": str, "vocab": str, "case": str, "bridge": str, "outcome": str}},
        ),
        runs_on="matrix",
        whatif=True,
    ),
    Analysis(
        "corpus",
        (
            "corpus.py",
            "corpus_job.py",
            "cluster.py",
            "pool.py",
            "jobserver.py",
            "schemas.py",
            "schemas.tsv",
            "soundness.py",
        ),
        Schema(
            {
                "schemas": int,
                "params": dict,
                "rows": list,
                "failures": list,
                "rejected": list,
                "timing": list,
                "hist": dict,
                "hist_edges_us": list,
            },
            {
                "rows": {**_BRIDGE_ROW, "schemas": int, "compiled": int, "under": int, "over": int},
                "failures": {**_BRIDGE_ROW, "schema": str, "status": str},
                "rejected": {"schema": str, "status": str, "error": str, "vocabs": str, "bridges": str},
                "timing": {**_BRIDGE_ROW, "masks": int, "mask_us_p50": _MS, "mask_us_p99": _MS},
            },
        ),
        runs_on="corpus-sample",
        whatif=False,
        built=(("data/schemas", "*.json"),),
    ),
    Analysis(
        "server",
        (
            "server.py",
            "server_cases.py",
            "server_judge.py",
            "server_causes.py",
            "llama_server.py",
            "generate.py",
            "synth.py",
            "native/",
            "soundness.py",
        ),
        Schema(
            {
                "rows": list,
                "tokens": list,
                "load": list,
                "llguidance": list,
                "port_llguidance": str,
                "builds": dict,
                "cases": dict,
                "temperature": _NUM,
                "seed": int,
            },
            {
                "rows": {
                    "model": str,
                    "vocab": str,
                    "llguidance": str,
                    "sampler": str,
                    "case": str,
                    "http_status": int,
                    "error_field": bool,
                    "outcome": str,
                },
                "load": {
                    "model": str,
                    "llguidance": str,
                    "sampler": str,
                    "requests": int,
                    "violations": int,
                    "healthy_after": bool,
                },
            },
        ),
        runs_on="server",
        whatif=True,
        built=(("data/native/server/bin", "*"),),
    ),
)
BY_NAME = {a.name: a for a in ANALYSES}
# the report's sections in the page's order: the guide's tables in the guide's order, then what goes
# beyond it. "beyond" and "review" are the report's own, over the others' results
PAGE = (
    "census",
    "leak",
    "forced",
    "probe",
    "native",
    "matrix",
    "server",
    "beyond",
    "engines",
    "exactness",
    "soundness",
    "corpus",
    "review",
)


def names(runs_on: str | None = None, whatif: bool | None = None) -> tuple[str, ...]:
    """The analyses' names, in the registry's order, those that run on `runs_on` or in a what-if."""
    return tuple(
        a.name for a in ANALYSES if (runs_on is None or a.runs_on == runs_on) and (whatif is None or a.whatif == whatif)
    )
