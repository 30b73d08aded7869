"""The other engines' cost, per engine (`make bench`, issue 46 "Cost").

The engines analysis runs each engine of its registry (lm-format-enforcer, outlines) on an input
in a forked process and records each one's `seconds` in its result (`RESULTS/engines/INPUT.json`);
its run's wall is in its timing file, beside every other analysis's. Issue 46's goals: the
engines analysis adds at most 15% to `make report`'s compute on 2 cores, and at most 3 s to a
what-if on llama-spm. The what-if's figure is read from what-ifs already run
(`reports/whatif/*/results/`, written by `make whatif`), none is run here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..paths import REPORTS, RESULTS
from .benchmd import BenchPart, csv_row, table
from .recorded import WORKERS, Pool, Run, pool_runs, read_pool, read_runs, results_of
from .whatif_time import WHATIF_VOCAB

GOAL_SHARE = 0.15  # of make report's compute, on 2 cores
GOAL_WHATIF_S = 3.0  # in a what-if on llama-spm


def per_engine(results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per engine: the inputs it has seconds on, their sum, its longest input, and the inputs
    where its row records an error and no seconds (a crash, an exception)."""
    out: dict[str, dict[str, Any]] = {}

    def entry(engine: str) -> dict[str, Any]:
        blank = {"engine": engine, "inputs": 0, "seconds": 0.0, "max": 0.0, "max_input": "", "none": []}
        return out.setdefault(engine, blank)

    for name, r in sorted(results.items()):
        secs = r.get("seconds", {})
        for engine, s in sorted(secs.items()):
            e = entry(engine)
            e["inputs"] += 1
            e["seconds"] += float(s)
            if float(s) > e["max"]:
                e["max"], e["max_input"] = float(s), name
        for row in r.get("rows", []):
            if row.get("engine") not in secs:
                entry(str(row.get("engine")))["none"].append(name)
    return [out[k] for k in sorted(out)]


def share(runs: list[Run], pool: Pool | None = None) -> dict[str, Any]:
    """The engines analysis's wall and compute against every other analysis's, summed over the runs;
    `mixed` where the last pool (`pool`) ran only some of them: runs of different `make report`s ran
    under different loads, and a share across them is no figure (an engines rerun on a quiet machine
    against the others' from a loaded one read +27% where one report reads +14%)."""
    mine = [r for r in runs if r.analysis == "engines"]
    rest = [r for r in runs if r.analysis != "engines"]
    return {
        "mixed": pool is not None and len(pool_runs(runs, pool)) != len(runs),
        "runs": len(mine),
        "wall": sum(r.wall for r in mine),
        "compute": sum(r.compute for r in mine),
        "rest_wall": sum(r.wall for r in rest),
        "rest_compute": sum(r.compute for r in rest),
    }


def whatifs(root: Path) -> list[dict[str, Any]]:
    """Each what-if under `root` with an engines run: its folder, input, the run's wall and the engines' seconds."""
    out = []
    for folder in sorted(p for p in root.glob("*") if (p / "results" / ".timing" / "engines").is_dir()):
        got = results_of("engines", folder / "results")
        for run in read_runs(folder / "results"):
            if run.analysis == "engines":
                secs = got.get(run.input, {}).get("seconds", {})
                out.append(
                    {"whatif": folder.name, "input": run.input, "wall": run.wall, "engines": dict(sorted(secs.items()))}
                )
    return out


def engines_cost(results: Path = RESULTS, whatif_root: Path = REPORTS / "whatif") -> dict[str, Any] | None:
    """Per engine its seconds, the analysis's share of the report, the what-ifs' engines runs; None without results."""
    got = results_of("engines", results)
    if not got:
        return None
    return {
        "engines": per_engine(got),
        "share": share(read_runs(results), read_pool(results)),
        "whatifs": whatifs(whatif_root),
    }


def _verdict(value: float, goal: float, unit: str) -> str:
    """'met (2.4 s)' or 'not met (27%)': `unit` the number's format and its unit."""
    fmt, _, word = unit.partition(" ")
    return f"{'met' if value <= goal else 'not met'} ({value:{fmt}}{word})"


def engines_context(c: dict[str, Any] | None) -> dict[str, Any] | None:
    if c is None:
        return None
    s = c["share"]
    added = s["wall"] / s["rest_wall"] if s["rest_wall"] else 0.0
    spm = [w for w in c["whatifs"] if w["input"] == WHATIF_VOCAB]
    return {
        "runs": s["runs"],
        "wall": f"{s['wall']:.1f}",
        "compute": f"{s['compute']:.1f}",
        "engines_s": f"{sum(e['seconds'] for e in c['engines']):.1f}",
        "rest_wall": f"{s['rest_wall']:.1f}",
        "added": f"{100 * added:.0f}",
        "added_2": f"{s['wall'] / WORKERS:.1f}",
        "compute_added": f"{100 * s['compute'] / s['rest_compute']:.0f}" if s["rest_compute"] else "-",
        "goal_share": f"{100 * GOAL_SHARE:.0f}",
        "verdict_share": (
            "not judged: the recorded runs come from more than one `make report` (rerun it from empty)"
            if s["mixed"]
            else _verdict(100 * added, 100 * GOAL_SHARE, ".0f %")
        ),
        "goal_whatif": f"{GOAL_WHATIF_S:.0f}",
        "verdict_whatif": _verdict(max(w["wall"] for w in spm), GOAL_WHATIF_S, ".1f  s") if spm else "",
        "table": table(
            [
                "engine",
                "inputs",
                "seconds, summed",
                "mean s",
                "longest s (input)",
                "no seconds recorded (its row's error)",
            ],
            [
                [
                    e["engine"],
                    e["inputs"],
                    f"{e['seconds']:.1f}",
                    f"{e['seconds'] / e['inputs']:.2f}" if e["inputs"] else "-",
                    f"{e['max']:.2f} ({e['max_input']})",
                    ", ".join(e["none"]),
                ]
                for e in c["engines"]
            ],
        ),
        "whatifs": table(
            ["what-if", "input", "engines run's wall s", *(e["engine"] + " s" for e in c["engines"])],
            [
                [
                    w["whatif"],
                    w["input"],
                    f"{w['wall']:.2f}",
                    *(f"{w['engines'].get(e['engine'], 0.0):.2f}" for e in c["engines"]),
                ]
                for w in c["whatifs"]
            ],
        )
        if c["whatifs"]
        else None,
    }


@dataclass(frozen=True)
class EnginesCost(BenchPart):
    """`engines_cost`'s figures; None where the engines analysis has no result."""

    measured: dict[str, Any] | None

    def rows(self) -> list[dict[str, object]]:
        c = self.measured
        if c is None:
            return []
        s = c["share"]
        out = [csv_row("engines_cost", e["engine"], e["inputs"], "seconds", e["seconds"]) for e in c["engines"]]
        ratio = s["wall"] / s["rest_wall"] if s["rest_wall"] else None
        out.append(csv_row("engines_cost", "ALL", s["runs"], "analysis_wall", s["wall"], ratio))
        for w in c["whatifs"]:
            out.append(csv_row("engines_whatif", w["whatif"], len(w["engines"]), "wall", w["wall"]))
            out += [csv_row("engines_whatif", w["whatif"], 1, e, x) for e, x in w["engines"].items()]
        return out

    def context(self) -> dict[str, Any]:
        return {"engines_cost": engines_context(self.measured)}
