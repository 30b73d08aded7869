"""What `make report` leaves behind about its own time, read back for `make bench`'s floor,
engines' cost and scale parts (issues 46 and 47): nothing here runs anything.

Each run of the report (one analysis on one input) writes `RESULTS/.timing/ANALYSIS/INPUT.json`
(`run.Worker`): its `wall`, the kernel's start, the `cells`' seconds, the vocab's `load` and the
analysis's own compute (`analysis` = cells - load), the reset `between` notebooks and the `publish`
(HTML export and writes). The pool (`batch`) writes `RESULTS/.timing/pool.json` once per
`make report` that ran anything: its `wall` (plan included) and how many `runs` it ran. A later
`make report` that reruns only some analyses rewrites pool.json with its own runs only, so
`pool_runs` picks the runs that pool ran by when their files were written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..paths import RESULTS

WORKERS = 2  # make report -j2: the 2 cores


@dataclass(frozen=True)
class Run:
    """One run's timing file."""

    analysis: str
    input: str
    wall: float
    compute: float  # the analysis's own compute: its cells less the vocab's load
    mtime: float  # when its timing file was written
    load: float = 0.0  # the vocab's load in the kernel (llama.cpp's `llama_model_load_from_file`, its checks before)

    @property
    def overhead(self) -> float:
        """The run's wall outside the analysis's compute: kernel start, vocab load, reset, export."""
        return self.wall - self.compute


@dataclass(frozen=True)
class Pool:
    """pool.json: the last pool's wall and runs, and when it ended (the file's mtime)."""

    wall: float
    runs: int
    ended: float


def read_runs(results: Path = RESULTS) -> list[Run]:
    """Every run's timing file under `results`/.timing, sorted by (analysis, input)."""
    out = []
    for f in sorted((results / ".timing").glob("*/*.json")):
        r: dict[str, Any] = json.loads(f.read_text(encoding="utf-8"))
        out.append(
            Run(
                str(r.get("notebook", f.parent.name)),
                str(r.get("vocab", f.stem)),
                float(r["wall"]),
                float(r.get("analysis", r["wall"])),
                f.stat().st_mtime,
                float(r.get("load", 0.0)),
            )
        )
    return sorted(out, key=lambda r: (r.analysis, r.input))


def read_pool(results: Path = RESULTS) -> Pool | None:
    p = results / ".timing" / "pool.json"
    if not p.exists():
        return None
    got = json.loads(p.read_text(encoding="utf-8"))
    return Pool(float(got["wall"]), int(got["runs"]), p.stat().st_mtime)


def pool_runs(runs: list[Run], pool: Pool, slack: float = 2.0) -> list[Run]:
    """The runs the last pool ran: every run where pool.json counts them all, else those whose
    timing file was written while it ran (its wall before pool.json was written)."""
    if pool.runs == len(runs):
        return runs
    return [r for r in runs if pool.ended - pool.wall - slack <= r.mtime <= pool.ended + slack]


def results_of(analysis: str, results: Path = RESULTS) -> dict[str, dict[str, Any]]:
    """Each input's result of `analysis` (its `ok` ones), by input name."""
    out = {}
    for f in sorted((results / analysis).glob("*.json")):
        r = json.loads(f.read_text(encoding="utf-8"))
        if r.get("status") == "ok":
            out[f.stem] = r
    return out


def by_analysis(runs: list[Run]) -> dict[str, list[Run]]:
    out: dict[str, list[Run]] = {}
    for r in runs:
        out.setdefault(r.analysis, []).append(r)
    return dict(sorted(out.items()))
