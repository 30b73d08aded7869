"""The report's scale, projected from its runs' recorded times (`make bench`, issue 47 item 6).

`batch` hands the pool one job per input: that input's analyses, run one after the other on one
worker (they share its vocab and bridges), the inputs the largest first (`batch.order`), each
job to the first worker free (`pool`). So the report's critical path is its longest job, and no
number of workers brings the wall below it. `simulate` replays that schedule over the recorded
run walls (`RESULTS/.timing/`) on 2, 4, 16 and 64 workers; beside it, the same runs each a job of
its own (largest first), the schedule were the inputs split into their runs. Only the runs' walls
are counted: the workers' start, the plan and the page's render are left out.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import batch
from ..analyses import BY_NAME
from ..paths import RESULTS
from .benchmd import BenchPart, csv_row, table
from .recorded import WORKERS, Pool, Run, pool_runs, read_pool, read_runs

WORKER_COUNTS = (2, 4, 16, 64)


def simulate(durations: Sequence[float], workers: int) -> float:
    """The wall of `durations` handed out in order, each to the worker free first (the lowest
    numbered on a tie), on `workers` workers."""
    free = [(0.0, i) for i in range(workers)]
    for d in durations:
        t, i = heapq.heappop(free)
        heapq.heappush(free, (t + d, i))
    return max(t for t, _ in free)


@dataclass(frozen=True)
class Job:
    """One input's runs, in the registry's order, as batch hands them to one worker."""

    input: str
    runs: tuple[Run, ...]

    @property
    def wall(self) -> float:
        return sum(r.wall for r in self.runs)


def jobs(runs: Sequence[Run]) -> list[Job]:
    """The runs grouped by input, in `batch.order`'s order (the largest input first)."""
    by_input: dict[str, list[Run]] = {}
    for r in runs:
        by_input.setdefault(r.input, []).append(r)
    rank = {name: (a.order, name) for name, a in BY_NAME.items()}
    ordered = batch.order({v: [r.analysis for r in rs] for v, rs in by_input.items()})
    return [
        Job(v, tuple(sorted(by_input[v], key=lambda r: rank.get(r.analysis, (99, r.analysis))))) for v, _ in ordered
    ]


def project(runs: Sequence[Run], counts: Sequence[int] = WORKER_COUNTS) -> dict[str, Any]:
    """Per worker count: the inputs as jobs (batch's order), every run a job (largest first), and
    the total over the workers (no schedule does better); the longest job and run."""
    js = jobs(runs)
    each = sorted((r.wall for r in runs), reverse=True)
    total = sum(r.wall for r in runs)
    longest = max(js, key=lambda j: (j.wall, j.input))
    longest_run = max(runs, key=lambda r: (r.wall, r.analysis, r.input))
    return {
        "runs": len(runs),
        "inputs": len(js),
        "total": total,
        "walls": [
            {
                "workers": n,
                "inputs": simulate([j.wall for j in js], n),
                "split": simulate(each, n),
                "even": total / n,
            }
            for n in counts
        ],
        "longest": longest,
        "longest_run": longest_run,
    }


def check_pool(runs: Sequence[Run], pool: Pool | None) -> dict[str, Any] | None:
    """The last pool's measured wall against the simulation of its own runs on 2 workers."""
    if pool is None:
        return None
    mine = pool_runs(list(runs), pool)
    if not mine:
        return None
    sim = simulate([j.wall for j in jobs(mine)], WORKERS)
    return {"runs": len(mine), "measured": pool.wall, "simulated": sim, "analyses": sorted({r.analysis for r in mine})}


def scale(results: Path = RESULTS) -> dict[str, Any] | None:
    """The projection over every recorded run, and the simulation checked on the last pool; None without runs."""
    runs = read_runs(results)
    if not runs:
        return None
    return {**project(runs), "check": check_pool(runs, read_pool(results))}


def scale_context(s: dict[str, Any] | None) -> dict[str, Any] | None:
    if s is None:
        return None
    longest: Job = s["longest"]
    lr: Run = s["longest_run"]
    at_most = s["walls"][-1]
    bound_from = next((w["workers"] for w in s["walls"] if w["inputs"] <= longest.wall), None)
    check = s["check"]
    return {
        "runs": s["runs"],
        "inputs": s["inputs"],
        "total": f"{s['total']:.1f}",
        "longest": longest.input,
        "longest_wall": f"{longest.wall:.1f}",
        "longest_parts": ", ".join(f"{r.analysis} {r.wall:.1f}" for r in longest.runs),
        "longest_run": f"{lr.analysis} on {lr.input}, {lr.wall:.1f} s",
        "workers": at_most["workers"],
        "bound_from": bound_from,
        "bound": f"{at_most['inputs']:.1f}",
        "split_bound": f"{at_most['split']:.1f}",
        "check": None
        if check is None
        else {
            "runs": check["runs"],
            "analyses": ", ".join(check["analyses"]),
            "measured": f"{check['measured']:.1f}",
            "simulated": f"{check['simulated']:.1f}",
            "ratio": f"{check['measured'] / check['simulated']:.2f}" if check["simulated"] else "-",
        },
        "table": table(
            ["workers", "inputs as jobs (batch's order) s", "each run a job (largest first) s", "total / workers s"],
            [[w["workers"], f"{w['inputs']:.1f}", f"{w['split']:.1f}", f"{w['even']:.1f}"] for w in s["walls"]],
        ),
    }


@dataclass(frozen=True)
class Scale(BenchPart):
    """`scale`'s projection; None where no run is recorded."""

    measured: dict[str, Any] | None

    def rows(self) -> list[dict[str, object]]:
        s = self.measured
        if s is None:
            return []
        out = [csv_row("scale", s["longest"].input, len(s["longest"].runs), "critical_path", s["longest"].wall)]
        for w in s["walls"]:
            n = w["workers"]
            out.append(csv_row("scale", "ALL", s["inputs"], f"inputs_on_{n}", w["inputs"], w["inputs"] / w["even"]))
            out.append(csv_row("scale", "ALL", s["runs"], f"split_on_{n}", w["split"], w["split"] / w["even"]))
        return out

    def context(self) -> dict[str, Any]:
        return {"scale": scale_context(self.measured)}
