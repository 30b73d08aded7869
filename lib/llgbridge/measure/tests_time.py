"""`make test`'s test time (`make bench`, issue 47: at most 180 s on 2 cores): the same pytest
command the Makefile runs after its linters, run once in this tree, its own summary line read
back ("N passed, M skipped in S s"), and its slowest tests beside it, so the seconds have names.

Run after `make report` (as `make bench` is): a test that needs the report's current results is
skipped where they are missing, and the count of skipped tests is shown with the time.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from ..paths import ROOT
from .benchmd import BenchPart, csv_row, table

GOAL_S = 180.0  # issue 47: make test's test time on 2 cores
SLOWEST = 10
# the Makefile's test recipe, less its linters (timed by nothing here)
PYTEST = ["-m", "pytest", "-n", "auto", "--dist", "loadfile", "--no-loadscope-reorder", "-p", "no:cacheprovider"]

_SUMMARY = re.compile(r"^=*\s*(?P<counts>.*?) in (?P<s>[\d.]+)s(?: \(\S+\))?\s*=*$")
_DURATION = re.compile(r"^(?P<s>[\d.]+)s (?P<when>call|setup|teardown)\s+(?P<test>\S.*)$")


def parse(out: str) -> dict[str, Any]:
    """pytest's own summary line (its counts and seconds) and its `--durations` lines; ValueError
    where there is no summary line (pytest did not get as far)."""
    lines = out.splitlines()
    for line in reversed(lines):
        m = _SUMMARY.match(line.strip())
        if m and re.search(r"\d+ (passed|failed|error)", m["counts"]):
            counts = {k: int(n) for n, k in re.findall(r"(\d+) (\w+)", m["counts"])}
            break
    else:
        raise ValueError("pytest printed no summary line")
    slowest = [
        {"test": d["test"], "when": d["when"], "s": float(d["s"])}
        for d in (_DURATION.match(ln.strip()) for ln in lines)
        if d
    ]
    return {"seconds": float(m["s"]), "counts": counts, "slowest": slowest[:SLOWEST]}


def tests_time() -> dict[str, Any]:
    """One run of the suite's tests as `make test` runs them: pytest's seconds and counts, the
    process's wall, the slowest tests, and pytest's exit status."""
    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, *PYTEST, "-q", f"--durations={SLOWEST}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.monotonic() - t0
    try:
        got = parse(r.stdout)
    except ValueError as e:
        return {"error": f"{e} (exit {r.returncode}): {(r.stdout + r.stderr).strip()[-300:]}", "wall": wall}
    return {**got, "wall": wall, "exit": r.returncode}


def tests_context(t: dict[str, Any] | None) -> dict[str, Any] | None:
    if t is None:
        return None
    if "error" in t:
        return {"goal": f"{GOAL_S:.0f}", "error": t["error"]}
    c = t["counts"]
    met = t["seconds"] <= GOAL_S and t["exit"] == 0
    return {
        "goal": f"{GOAL_S:.0f}",
        "error": None,
        "verdict": f"{'met' if met else 'not met'} ({t['seconds']:.1f} s"
        + ("" if t["exit"] == 0 else f"; pytest exited {t['exit']}")
        + ")",
        "table": table(
            ["pytest's time s", "process wall s", *sorted(c)],
            [[f"{t['seconds']:.1f}", f"{t['wall']:.1f}", *(c[k] for k in sorted(c))]],
        ),
        "slowest": table(
            ["test", "phase", "s"], [[f"`{d['test']}`", d["when"], f"{d['s']:.1f}"] for d in t["slowest"]]
        ),
    }


@dataclass(frozen=True)
class TestsTime(BenchPart):
    """`tests_time`'s run; None where it was not run."""

    run: dict[str, Any] | None

    def rows(self) -> list[dict[str, object]]:
        t = self.run
        if t is None or "error" in t:
            return []
        n = sum(t["counts"].values())
        return [
            csv_row("tests", "ALL", n, "pytest", t["seconds"], t["seconds"] / GOAL_S),
            csv_row("tests", "ALL", n, "wall", t["wall"]),
        ]

    def context(self) -> dict[str, Any]:
        return {"tests": tests_context(self.run)}

    def failures(self) -> list[str]:
        t = self.run
        if t is None:
            return []
        if "error" in t:
            return [f"the tests' time: {t['error']}"]
        return [] if t["exit"] == 0 else [f"the tests' time: pytest exited {t['exit']}"]
