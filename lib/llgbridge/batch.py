"""Run every out-of-date (analysis, input) of the report on a small pool of long-lived workers.

    python -m llgbridge.batch [--groups "GROUP=NAMES ..."] [--inputs SET="V1 V2 ..." ...] \\
        [--analyses census leak ...] [--workers N] [--stamp PATH] [--results DIR] [--out DIR]
        [--cluster tcp://host:port]

This is what `make report` runs for every analysis, once: each analysis of the registry
(`analyses.ANALYSES`, or only those `--analyses` names) on the inputs of its `runs_on` set, as
`inputsets` names them (`--groups`: some groups replaced, make report's INPUTS); with `--inputs
SET="..."`, only the sets given, each as given (a set not given runs nothing). Make keeps the dependency
graph: one target, out of date when any file the analyses depend on changed (`SHARED_CODE`, each
analysis's notebook and `MODULES`, the fixtures, the models, the native build). This module then
decides which (analysis, input) runs must really run, from what each result records
(`results.provenance`): a result is current when it is `ok`, matches its schema, was made with
the default parameters by the code that is there now (`results.code_version`) from the same input
file. So editing one analysis reruns only its runs, and editing the report, its templates or the
pipeline reruns none.

The runs go to workers (`run.Worker`, one process and one kernel each), an input at a time, the
largest first: a worker keeps its interpreter, imports and kernel from one input to the next, and
an input's analyses share its vocab and bridges. A crash inside native code ends only its own run
(the kernel is started again for the next). A worker that dies, or stops answering (`pool.STALL`:
a stopped process, one wedged outside a cell's time limit), is killed, and its input's remaining
runs go once more to a fresh worker; lost twice, they fail naming the cause, and the others go on
(`pool`, the same pool the corpus runs on).

`--cluster tcp://host:port` (`make report CLUSTER=...`) sends the same jobs to a Dask scheduler
instead (`remote`): the jobs' files come back and are written here, and the promises are the same.

How many workers: under `make -jN`, as many as Make's job slots allow, taken and given back
through Make's jobserver while the pool runs (the recipe is marked `+` so Make hands the slots
over), so `-j2` runs two at a time beside whatever else Make runs; a plain `make` runs one. Under
`make -n` (or -q, -t) it prints what it would run and why, and runs nothing.

Make runs this on every `make report` (its target is FORCEd: mtimes cannot tell a deleted result
or a file copied in with its old date), and the plan alone decides. The stamp is rewritten whenever
what the page is made from changed (`page_state`: the inputs, every result file, data/vocabs/),
whoever changed it, so Make re-renders the page then and only then; a failed run's result is
dated 1970, so the next `make report` reruns exactly what failed. Each run's timing (wall, kernel start,
cells, vocab load, the analysis's own compute) goes to `RESULTS/.timing/`, run metadata that the
benchmark reads (`bench.report_regeneration`), never the report's tables.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from . import inputsets, pool, remote
from . import params as P
from .analyses import ANALYSES, BY_NAME, INPUT_SETS
from .errors import InputError, Refused
from .inputs import Input
from .jobserver import Jobserver, make_flags
from .paths import REPORTS, RESULTS, VOCABS, name_problem, vocab_path, write_atomic, write_json
from .pool import Handle
from .results import why_stale, why_unusable
from .run import RunStatus, Worker, fast_imports, input_name, status_line, write_failed


class Where(TypedDict):
    """Where one job's runs go, when not where the pool's go (`run_pool`'s `where`)."""

    out: Path
    results: Path
    params: dict[str, dict[str, object]]


NO_RESULT = "no result yet"


def out_of_date(analysis: str, vocab: str, results: Path = RESULTS) -> str:
    """Why `analysis`'s result for `vocab` must be made again, or "" when it is current."""
    p = results / analysis / f"{vocab}.json"
    if not p.exists():
        return NO_RESULT
    try:
        r = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        return f"unreadable result ({type(e).__name__})"
    if not isinstance(r, dict) or r.get("status") != "ok":
        return "failed last time"
    if why_unusable(analysis, vocab, r):
        return "does not match its schema"
    return why_stale(results, analysis, r)


def plan(vocab: str, analyses: list[str], results: Path = RESULTS) -> dict[str, str]:
    """The analyses to run for `vocab`, each with why; the current ones are left out."""
    return {a: why for a in analyses if (why := out_of_date(a, vocab, results))}


def _size(vocab: str) -> int:
    try:
        return vocab_path(vocab).stat().st_size
    except OSError:
        return 0


def order(jobs: dict[str, list[str]]) -> list[tuple[str, list[str]]]:
    """The inputs the largest first (the file's size times its runs, a matrix counted as four),
    so the last input a worker takes is a small one and two workers end close together."""

    def cost(item: tuple[str, list[str]]) -> tuple[int, str]:
        vocab, analyses = item
        return (-_size(vocab) * sum(4 if a == "matrix" else 1 for a in analyses), vocab)

    return sorted(((v, a) for v, a in jobs.items() if a), key=cost)


# -- the worker ---------------------------------------------------------------------------------------
@contextmanager
def notebook_worker(
    out_root: Path | None,
    results: Path | None,
    notebooks: Path | None,
    params: dict[str, dict[str, object]] | None = None,
) -> Iterator[Handle]:
    """What a pool worker runs (`pool.run`): one `run.Worker` (one kernel) for every input it is
    handed, each input's analyses in turn (each with `params[analysis]`, default its defaults),
    each run's status sent as it ends."""
    fast_imports()
    import nbclient  # noqa: F401, E401 - counted as the worker's start-up

    os.environ["MAKEFLAGS"] = ""  # the kernels run no Make, and must not see its job slots
    # stopped by the pool (an interrupted make): leave through Worker.__exit__, which stops the kernel
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with Worker(
        out_root, results, notebooks_dir=notebooks or P.NOTEBOOK_DIR, progress=False
    ) as w:  # the pool says each run's line

        def handle(job: dict[str, Any], emit: Callable[[Any], None]) -> None:
            try:
                w.run_vocab(
                    job["vocab"],
                    job["analyses"],
                    job.get("params", params),
                    on_status=emit,
                    out_root=job.get("out"),
                    results_dir=job.get("results"),
                )
            except InputError as e:
                for a in job["analyses"]:
                    emit({"notebook": a, "vocab": input_name(job["vocab"]), "status": "failed", "error": str(e)})

        yield handle


@dataclass(frozen=True)
class Places:
    """Where a pool's runs go (`out_root`, default the worker's reports/; `results`), the folder of
    the notebooks they run (default the registry's) and each analysis's parameters (default its
    defaults), for every job that has no `Where` of its own."""

    results: Path = RESULTS
    out_root: Path | None = None
    notebooks: Path | None = None
    params: dict[str, dict[str, object]] | None = None


def run_pool(
    jobs: Sequence[tuple[str | Input, list[str]]],
    workers: int,
    server: Jobserver | None = None,
    places: Places | None = None,
    say: Callable[[str], None] = print,
    stall: float = pool.STALL,
    where: list[Where] | None = None,
) -> tuple[list[RunStatus], list[dict[str, float]]]:
    """Run `jobs` ((input, its analyses), in order) on at most `workers` workers (`pool.run`), as
    `places` says (default `Places()`); the first is this command's own slot, each other one takes a slot from `server`
    first. A worker lost mid-input runs that input's remaining analyses once more on a fresh
    worker; lost again, they fail naming the cause. Returns every run's status and each worker's
    start-up.

    `where[i]`, when given, is job i's own report folder, results and parameters in place of
    `places`' (a what-if's two sides on one pool)."""
    places = places or Places()
    total = sum(len(a) for _, a in jobs)
    statuses: list[RunStatus] = []
    done: list[list[str]] = [[] for _ in jobs]

    def emitted(i: int, st: RunStatus) -> None:
        statuses.append(st)
        done[i].append(str(st["notebook"]))
        say(f"{status_line(st)}  ({len(statuses)}/{total})")

    def payload(i: int, analyses: list[str]) -> dict[str, object]:
        return {"vocab": jobs[i][0], "analyses": analyses, **(dict(where[i]) if where else {})}

    def left(i: int) -> dict[str, object] | None:
        rest = [a for a in jobs[i][1] if a not in done[i]]
        return payload(i, rest) if rest else None

    def lost(i: int, why: str, tries: int) -> None:
        vocab, analyses = input_name(jobs[i][0]), jobs[i][1]
        why = f"the worker process was lost ({why}{', twice' if tries > 1 else ''}) before this run"
        for a in analyses:
            if a not in done[i]:
                st: RunStatus = {"notebook": a, "vocab": vocab, "status": "failed", "error": why}
                _write_failed(where[i]["results"] if where else places.results, st)
                emitted(i, st)

    stats = pool.run(
        [payload(i, a) for i, (_, a) in enumerate(jobs)],
        notebook_worker,
        (places.out_root, places.results, places.notebooks, places.params),
        workers=workers,
        slots=server,
        stall=stall,
        on_emit=emitted,
        again=left,
        on_lost=lost,
        on_done=lambda i, value, tries: None,
    )
    return statuses, stats.starts


def page_state(results: Path, sets: dict[str, list[str]], vocabs: Path = VOCABS) -> str:
    """What the page is made from, as one hash: the inputs Make named, every result file (its
    name, size and change time: a result written by any process, a run's or a by-hand one, moves
    it) and the files in data/vocabs/ (one removed, or one Make refused by name). The render is
    seconds; telling a changed result from an unchanged one by its dates alone is what left the
    old page up (issue 48, breaks 1 and 12)."""
    h = hashlib.sha256()
    for name in sorted(sets):
        h.update(f"inputs {name}={' '.join(sets[name])}\n".encode())
    for folder, pattern in ((results, "*/*.json"), (vocabs, "*")):
        for p in sorted(folder.glob(pattern)):
            if any(part.startswith(".") for part in p.relative_to(folder).parts):
                continue  # run metadata (.timing, .batch) and partial writes: never on the page
            try:
                st = p.stat()
            except OSError:
                continue
            h.update(f"{p.relative_to(folder)} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns}\n".encode())
    return h.hexdigest()


def mark_state(stamp: Path, state: str) -> None:
    """The stamp Make re-renders the page after: rewritten (so newer) only when `state` changed
    since it was last written, whether a run of this pool changed it or anything else did."""
    try:
        if stamp.read_text(encoding="utf-8").strip() == state:
            return
    except OSError:
        pass
    write_atomic(stamp, state + "\n")


def _write_failed(results: Path, st: RunStatus) -> None:
    try:
        write_failed(results / str(st["notebook"]) / f"{st['vocab']}.json", st, None)
    except OSError:
        pass


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m llgbridge.batch", description=__doc__.splitlines()[0])
    ap.add_argument(
        "--groups",
        default="",
        metavar='"GROUP=NAMES ..."',
        help=f"these groups of inputsets in place of theirs, as a shell splits it ({', '.join(inputsets.GROUPS)})",
    )
    ap.add_argument(
        "--inputs",
        action="append",
        default=[],
        metavar='SET="V1 V2"',
        help=f"only these input sets, each with these inputs ({', '.join(INPUT_SETS)})",
    )
    ap.add_argument("--analyses", nargs="*", default=None, help="only these analyses (default: the registry's)")
    ap.add_argument("--workers", type=int, default=None, help="at most this many (default: Make's -j, else 1)")
    ap.add_argument(
        "--stamp", type=Path, default=None, help="rewritten when what the page is made from changed (`page_state`)"
    )
    ap.add_argument("--results", type=Path, default=RESULTS, help="where the results are (default data/results/)")
    ap.add_argument(
        "--out", type=Path, default=None, help="where the executed notebooks and their pages go (default reports/)"
    )
    ap.add_argument(
        "--cluster",
        default="",
        metavar="tcp://HOST:PORT",
        help="run the jobs on this Dask scheduler (make report CLUSTER=...; llgbridge.remote), not the local pool",
    )
    ap.add_argument(
        "--cluster-wait",
        type=float,
        default=remote.WORKER_WAIT,
        metavar="S",
        help="with --cluster: give up when no worker joined in S seconds (default %(default)s)",
    )
    return ap


def _input_sets(specs: list[str], groups: str = "") -> dict[str, list[str]]:
    """Each `--inputs SET="V1 V2"`'s inputs, by set; without any, the registry's sets as
    `inputsets` makes them, `groups` replaced."""
    if not specs:
        for line in inputsets.refused_lines():  # said once, before the runs; the page names them too
            print(line, file=sys.stderr, flush=True)
        try:
            return inputsets.input_sets(inputsets.parse(groups))
        except InputError as e:
            raise Refused(str(e)) from None
    sets: dict[str, list[str]] = {}
    for spec in specs:
        name, _, listed = spec.partition("=")
        if name not in INPUT_SETS:
            raise Refused(f"--inputs {name}: no such input set; the registry's are {', '.join(INPUT_SETS)}")
        sets.setdefault(name, []).extend(filter(None, listed.replace(",", " ").split()))
    return sets


def _wanted(sets: dict[str, list[str]], only: list[str] | None) -> dict[str, list[str]]:
    """Each input's analyses, in the registry's order: those of `only` (default every one) that
    run on a set the input is in."""
    unknown = [n for n in only or () if n not in BY_NAME]
    if unknown:
        raise Refused(f"--analyses {' '.join(unknown)}: no such analysis in the registry (lib/llgbridge/analyses/)")
    wanted: dict[str, list[str]] = {}
    for analysis in ANALYSES:
        if only is None or analysis.name in only:
            for v in dict.fromkeys(sets.get(analysis.runs_on, [])):
                wanted.setdefault(v, []).append(analysis.name)
    for v in wanted:
        why = name_problem(v)
        if why:
            raise Refused(f"[{v}] {why}")
    return wanted


def _run_todo(
    todo: dict[str, list[str]],
    workers: int | None,
    make: tuple[int | None, str],
    places: Places,
    t0: float,
    plan_s: float,
) -> int:
    """Run `todo` (each input's analyses) on the pool, at most `workers` (default Make's -j, given
    with its MAKEFLAGS in `make`), where `places` says, and record its timing (since `t0`, the plan's `plan_s` of it):
    the exit status, 0 unless a result could not be written or a signal stopped the pool."""
    jobs, flags = make
    server = Jobserver(flags)
    limit = workers or jobs or 1
    n_runs = sum(len(x) for x in todo.values())
    print(f"== {n_runs} runs on {len(todo)} inputs, at most {limit} worker(s)", flush=True)
    try:
        with pool.stop_on_signals():
            statuses, starts = run_pool(
                order(todo),
                limit,
                server if server.usable and not workers else None,
                places=places,
                say=lambda s: print(s, flush=True),
            )
    except pool.Stopped as e:  # the workers, their kernels and servers are gone: nothing more is written
        print(f"batch: {e}: every worker ended; no stamp written", file=sys.stderr, flush=True)
        return 128 + e.signum
    finally:
        server.close()
    return _timed(places.results, statuses, {"workers": starts}, t0, plan_s)


def _timed(results: Path, statuses: list[RunStatus], extra: dict[str, object], t0: float, plan_s: float) -> int:
    """The batch's timing recorded (`RESULTS/.timing/pool.json`, with `extra`); its exit status: 1
    when a result could not be written (lost to the report: Make must stop and say so), else 0."""
    write_json(
        results / ".timing" / "pool.json",
        {
            "plan": round(plan_s, 4),
            "wall": round(time.monotonic() - t0, 4),
            **extra,
            "runs": len(statuses),
            "failed": sum(s["status"] != "ok" for s in statuses),
        },
    )
    return 1 if any("unwritten" in s for s in statuses) else 0


def _run_remote(todo: dict[str, list[str]], a: argparse.Namespace, t0: float, plan_s: float) -> int:
    """Run `todo` on the Dask scheduler `a.cluster` (`remote`): the jobs' files come back here and
    are written into `a.results` and `a.out` (default reports/); no worker: one line, exit 1, nothing written."""
    n_runs = sum(len(x) for x in todo.values())
    print(f"== {n_runs} runs on {len(todo)} inputs, on the Dask scheduler at {a.cluster}", flush=True)
    try:
        with pool.stop_on_signals():
            got = remote.run_cluster(
                order(todo), a.cluster, a.results, a.out or REPORTS, lambda s: print(s, flush=True), wait=a.cluster_wait
            )
    except remote.NoWorkers as e:
        print(f"batch: {e}; nothing was run", file=sys.stderr, flush=True)
        return 1
    except pool.Stopped as e:  # the client gone, the scheduler forgets its jobs; no stamp
        print(f"batch: {e}: the jobs were left to the scheduler; no stamp written", file=sys.stderr, flush=True)
        return 128 + e.signum
    return _timed(a.results, got.statuses, {"workers": [], "engine": "dask", "retries": got.retries}, t0, plan_s)


def main(argv: list[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    try:
        if a.cluster and (why := remote.cluster_problem(a.cluster)):
            raise Refused(f"--cluster {a.cluster!r} (make report CLUSTER=...): {why}")
        sets = _input_sets(a.inputs, a.groups)
        wanted = _wanted(sets, a.analyses)
    except Refused as e:
        print(e, file=sys.stderr)
        return 2
    t0 = time.monotonic()
    plans = {v: p for v in wanted if (p := plan(v, wanted[v], a.results))}
    todo = {v: list(p) for v, p in plans.items()}
    plan_s = time.monotonic() - t0
    dry, jobs, flags = make_flags()
    # a run from empty results said "(no result yet)" once per input, 22 lines before anything ran:
    # those are one line; `make -n` (which asks what would run and why) still gets every input's
    fresh = [v for v, reasons in plans.items() if set(reasons.values()) == {NO_RESULT}]
    for v, reasons in plans.items():
        if dry or len(fresh) < 2 or v not in fresh:
            print(f"[{v}] " + ", ".join(f"{n} ({reason})" for n, reason in reasons.items()), flush=True)
    if not dry and len(fresh) >= 2:
        shown = ", ".join(fresh) if len(fresh) <= 4 else f"{', '.join(fresh[:3])} and {len(fresh) - 3} more"
        print(f"[{len(fresh)} inputs] no result yet, so each of their analyses runs: {shown}", flush=True)
    if dry:
        if not plans:  # else Make's echo of this command would be all `make -n` says
            print("nothing to run: every result is current", flush=True)
        return 0
    if todo and a.cluster:
        code = _run_remote(todo, a, t0, plan_s)
    elif todo:
        code = _run_todo(todo, a.workers, (jobs, flags), Places(results=a.results, out_root=a.out), t0, plan_s)
    else:
        code = 0
    if code:
        return code
    if a.stamp is not None:
        mark_state(a.stamp, page_state(a.results, sets))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["out_of_date", "plan", "order", "run_pool", "notebook_worker"]
