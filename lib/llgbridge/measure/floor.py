"""The report's floor (`make bench`, issue 47 item 1): per analysis, the code under review's own
work beside the suite's share of the same runs, and the report's wall against that floor.

The code under review is llama.cpp, llguidance and llama-server. Its own work, per run, where a
file left by `make report` (or bench's own CSV) records it:

- native and server: no result records it all; the analysis's compute times the share that
  `make bench`'s split of that analysis (bench.csv's `native_part`, `server_part` rows) found in
  the compiled programs' and the server's own parts (those its table marks "(floor)": the
  harness's starts and vocab loads, its samplers' tokenizer builds, llama.cpp's tests and the
  walks; the servers' starts, with the model's load, and the requests), over the vocabs or models
  it split. Where no split is recorded, the server counts only its generation, by its own
  timings (each answer's tokens over its `predicted_per_second`, both in the result), and native
  nothing;
- matrix: llama.cpp's generation with the mask, each (model, case, bridge) as the analysis timed it;
- corpus: llguidance's masks (each timing row's masks x its mean µs);
- census, leak, forced, probe, exactness and soundness: their calls into llama.cpp and
  llguidance are made in the kernel's process, where nothing the report leaves times them; the
  analysis's compute times the share those calls are of it in `make bench`'s split of the same
  analyses (bench.csv's `inproc_census`, ... rows, `inproc_split`), over the inputs it ran. Where no
  split is recorded, all of it counts as the suite's;
- the engines' analyses: the suite's, whose work is the other engines', not the code under review's.

Every run's vocab load in its kernel (`llama_model_load_from_file`, timed by the run) is
llama.cpp's work too, as the harness's and the server's loads are in their splits.

The suite's share is the rest of the run's wall: the analysis's own Python (its compute less the
above) and the run's overhead (kernel start, reset, HTML export). The floor is the
code under review's work over the 2 workers; the report's wall is pool.json's (`recorded`).
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..paths import REPORTS, RESULTS
from .benchmd import BenchPart, csv_row, table
from .inproc_split import BENCH as INPROC_BENCH
from .inproc_split import INPROC, INPROC_PARTS
from .native_split import NATIVE_PARTS
from .recorded import WORKERS, Run, by_analysis, pool_runs, read_pool, read_runs, results_of
from .scale import jobs, simulate
from .server_split import SERVER_PARTS

UNRECORDED = "its compute: not recorded, counted as the suite's"
GOAL = 1.25  # issue 47: the report's wall at most 1.25 x its floor
# the parts each split marks as the code under review's own work
SPLIT_FLOOR = {
    "native": tuple(k for k, label in NATIVE_PARTS if label.endswith("(floor)")),
    "server": tuple(k for k, label in SERVER_PARTS if label.endswith("(floor)")),
    **{a: tuple(k for k, label in INPROC_PARTS if label.endswith("(floor)")) for a in INPROC},
}


def server_own(r: dict[str, Any]) -> float:
    """llama-server's generation seconds over a server result's answers: tokens / predicted_per_second."""
    tokens = r.get("tokens") or [[None] * int(x.get("n_tokens", 0)) for x in r["rows"]]
    return sum(len(t) / x["tok_s"] for t, x in zip(tokens, r["timing"]["constrained_tok_s"]) if x["tok_s"] > 0)


def matrix_own(r: dict[str, Any]) -> float:
    return sum(float(t["seconds"]) for t in r.get("timing", []))


def corpus_own(r: dict[str, Any]) -> float:
    rows = r.get("timing", [])
    return sum(int(t["masks"]) * float(t["mask_us_avg"]) for t in rows if t.get("mask_us_avg") is not None) / 1e6


def engines_own(r: dict[str, Any]) -> float:
    """The engines' own seconds (each library's table, masks and walks, in its process), per engine."""
    return sum(float(x) for x in r.get("seconds", {}).values())


def engines_e2e_own(r: dict[str, Any]) -> float:
    """The engines' own generation seconds (llama-server's for GBNF), per model and engine."""
    return sum(float(x) for per_model in r.get("seconds", {}).values() for x in per_model.values())


RECORDED: dict[str, tuple[Callable[[dict[str, Any]], float], str]] = {
    # issue 60: the other engines are code under review too (their own work, not the suite's)
    "engines": (engines_own, "each engine's own seconds (result)"),
    "engines_e2e": (engines_e2e_own, "each engine's own generation seconds (result)"),
    "server": (server_own, "llama-server's generation, its own timings (result)"),
    "matrix": (matrix_own, "llama.cpp's generation with the mask (result's timing)"),
    "corpus": (corpus_own, "llguidance's masks: masks x mean µs (result's timing)"),
}


def csv_rows(bench_csv: Path) -> list[dict[str, Any]]:
    """bench.csv's rows (none where there is no snapshot)."""
    if not bench_csv.exists():
        return []
    with bench_csv.open(encoding="utf-8") as f:
        return list(csv.DictReader(f))


def split_shares(bench_rows: list[dict[str, Any]]) -> dict[str, float]:
    """Per split analysis (native, server, the in-process ones), its floor parts over its wall,
    summed over the vocabs, models or inputs it split (bench.csv's rows, or the same run's
    splits); an analysis with no split is left out."""
    got = {}
    for analysis, parts in SPLIT_FLOOR.items():
        rows = [r for r in bench_rows if r["benchmark"] == INPROC_BENCH.get(analysis, f"{analysis}_part")]
        wall = sum(float(r["seconds"]) for r in rows if r["variant"] == "wall")
        if wall:
            got[analysis] = sum(float(r["seconds"]) for r in rows if r["variant"] in parts) / wall
    return got


def own_seconds(results: Path, shares: dict[str, float]) -> tuple[Callable[[Run], float], dict[str, str]]:
    """Per run, the code under review's seconds; and per analysis, how they were found."""
    got = {a: results_of(a, results) for a in RECORDED if a not in shares}
    how = {a: label for a, (_, label) in RECORDED.items()}
    for a, share in shares.items():
        split = "the in-process" if a in INPROC else f"the {a}"
        how[a] = f"compute x {100 * share:.0f}%: {split} split's floor share (bench.csv)"

    def computed(run: Run) -> float:
        if run.analysis in shares:
            return run.compute * shares[run.analysis]
        if run.analysis in RECORDED:
            r = got[run.analysis].get(run.input)
            return RECORDED[run.analysis][0](r) if r else 0.0
        return 0.0

    def own(run: Run) -> float:
        return computed(run) + run.load

    return own, how


def per_analysis(runs: list[Run], own: Callable[[Run], float]) -> list[dict[str, Any]]:
    """A row per analysis: runs, wall, the code under review's seconds (the vocab loads among
    them), the analysis's compute."""
    return [
        {
            "analysis": a,
            "runs": len(rs),
            "wall": sum(r.wall for r in rs),
            "own": sum(own(r) for r in rs),
            "load": sum(r.load for r in rs),
            "compute": sum(r.compute for r in rs),
        }
        for a, rs in by_analysis(runs).items()
    ]


def walls(results: Path, runs: list[Run], own: Callable[[Run], float]) -> list[dict[str, Any]]:
    """The report's walls, each against the floor of the runs it covers: pool.json's measured
    wall, and where it covers fewer runs than are recorded, every run scheduled on 2 workers."""
    out: list[dict[str, Any]] = []
    pool = read_pool(results)
    if pool is not None:
        mine = pool_runs(runs, pool)
        names = sorted({r.analysis for r in mine})
        what = "every run" if len(mine) == len(runs) else f"only its runs: {', '.join(names)}"
        out.append({"wall": f"make report's pool, measured (pool.json; {what})", "s": pool.wall, "runs": mine})
    if pool is None or len(out[0]["runs"]) != len(runs):
        sim = simulate([j.wall for j in jobs(runs)], WORKERS)
        out.append({"wall": "every recorded run, batch's schedule on 2 workers (scale)", "s": sim, "runs": runs})
    for w in out:
        w["floor"] = sum(own(r) for r in w["runs"]) / WORKERS
        w["compute"] = sum(r.compute for r in w["runs"]) / WORKERS
    return out


def floor(
    results: Path = RESULTS, bench_csv: Path = REPORTS / "bench.csv", split_rows: list[dict[str, Any]] | None = None
) -> dict[str, Any] | None:
    """Per analysis the code under review's own seconds and the suite's, and the report's walls
    against the floor; None where no run is recorded. The splits' shares are the same
    `make bench` run's splits (`split_rows`) where there are any, else the last snapshot's
    (`bench_csv`)."""
    runs = read_runs(results)
    if not runs:
        return None
    own, how = own_seconds(results, split_shares(csv_rows(bench_csv) if split_rows is None else split_rows))
    return {"rows": per_analysis(runs, own), "how": how, "walls": walls(results, runs, own)}


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "-"


def floor_context(f: dict[str, Any] | None) -> dict[str, Any] | None:
    if f is None:
        return None
    rows = f["rows"]
    total = {k: sum(r[k] for r in rows) for k in ("runs", "wall", "own", "load", "compute")}
    line = [
        [
            r["analysis"],
            r["runs"],
            f"{r['wall']:.1f}",
            f"{r['own']:.1f}",
            f"{r['load']:.1f}",
            f"{r['compute'] - (r['own'] - r['load']):.1f}",
            f"{r['wall'] - r['compute'] - r['load']:.1f}",
            f"{100 * (r['wall'] - r['own']) / r['wall']:.0f}%" if r["wall"] else "-",
            "" if r["analysis"] == "**all**" else f["how"].get(r["analysis"], UNRECORDED),
        ]
        for r in [*rows, {"analysis": "**all**", **total}]
    ]
    return {
        "goal": f"{GOAL:.2f}",
        "workers": WORKERS,
        "table": table(
            [
                "analysis",
                "runs",
                "wall s",
                "code under review s",
                "of which vocab loads s",
                "suite: compute s",
                "suite: overhead s",
                "suite's share",
                "code under review: how",
            ],
            line,
        ),
        "walls": table(
            ["report's wall", "runs", "wall s", "floor s", "wall / floor", "compute / 2 s", "wall / (compute / 2)"],
            [
                [
                    w["wall"],
                    len(w["runs"]),
                    f"{w['s']:.1f}",
                    f"{w['floor']:.1f}",
                    _ratio(w["s"], w["floor"]),
                    f"{w['compute']:.1f}",
                    _ratio(w["s"], w["compute"]),
                ]
                for w in f["walls"]
            ],
        ),
    }


@dataclass(frozen=True)
class Floor(BenchPart):
    """`floor`'s rows and walls; None where no run is recorded."""

    measured: dict[str, Any] | None

    def rows(self) -> list[dict[str, object]]:
        f = self.measured
        if f is None:
            return []
        out = []
        for r in f["rows"]:
            out.append(csv_row("floor", r["analysis"], r["runs"], "wall", r["wall"]))
            out.append(csv_row("floor", r["analysis"], r["runs"], "code_under_review", r["own"]))
        for i, w in enumerate(f["walls"]):
            tag = "pool" if i == 0 and w["wall"].startswith("make report's pool") else "projected"
            out.append(csv_row("floor", "ALL", len(w["runs"]), f"{tag}_floor", w["floor"]))
            out.append(
                csv_row(
                    "floor", "ALL", len(w["runs"]), f"{tag}_wall", w["s"], w["s"] / w["floor"] if w["floor"] else None
                )
            )
        return out

    def context(self) -> dict[str, Any]:
        return {"floor": floor_context(self.measured)}
