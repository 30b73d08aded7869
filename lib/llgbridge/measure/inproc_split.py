"""The in-process analyses in parts (`make bench`, issue 47 item 1): census, leak, forced, probe,
exactness and soundness call llama.cpp and llguidance from their kernel's own process, where no
file the report leaves records how long those calls take.

Each of them runs here as the report runs it: its notebook's cells, in an IPython shell in this
process (`%matplotlib inline`, every cell's value formatted as a kernel formats it), on every input
the report ran it on, an input's analyses in the report's order so that the bridges one builds are
the next one's, as in a kernel. Every call into llguidance's C API (`llg.lib`), llama.cpp's
(`llama_cpp`'s `llama_*` functions) and the compiled binding (`_llamacall`) is timed where it is
made; a call inside another (llama.cpp's tokenizer, called back by llguidance) counts as its own,
not the outer's. The clock's own cost per call, measured here on a call that does nothing, is taken
off both the calls' seconds and the cells'. The vocab is loaded before the cells run, outside the
clock, as the report counts its load apart (`nb.TIMES`).

The floor (`floor.SPLIT_FLOOR`) takes each analysis's llguidance and llama.cpp share of its
compute, as it takes the native and server splits'.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import llama_cpp

from .. import analyses, llg, nb, params
from .. import vocab as V
from ..inputs import Input
from ..inputsets import input_sets
from ..paths import ROOT
from .benchmd import BenchPart, csv_row, table
from .calls import SelfTimer, timing

INPROC = ("census", "leak", "forced", "probe", "exactness", "soundness")
INPROC_PARTS = (
    ("llguidance", "llguidance's C API (floor)"),
    ("llama_cpp", "llama.cpp: its C API and the compiled binding (floor)"),
    ("python", "the suite's own Python around them"),
)
# bench.csv's name for each analysis's rows (census_part already names the census's own Python-vs-C rows)
BENCH = {a: f"inproc_{a}" for a in INPROC}
CALIBRATION_CALLS = 200_000


@dataclass
class CallClock:
    """Seconds and calls per kind (INPROC_PARTS' native ones), each call's own seconds only (the
    one timer, `calls.SelfTimer`)."""

    seconds: dict[str, float] = field(default_factory=lambda: {"llguidance": 0.0, "llama_cpp": 0.0})
    calls: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._timer = SelfTimer(self._add)

    def _add(self, kind: str, _under: str, own: float, *_: Any) -> None:
        self.seconds[kind] += own
        self.calls[kind] += 1

    def timed(self, kind: str, f: Callable[..., Any]) -> Callable[..., Any]:
        return self._timer.wrap(kind, f)

    def snapshot(self) -> tuple[dict[str, float], Counter[str]]:
        return dict(self.seconds), Counter(self.calls)


def _targets() -> list[tuple[object, str, str]]:
    """(object, attribute, kind) for every native call the in-process analyses can make."""
    got: list[tuple[object, str, str]] = []
    for name in dir(llama_cpp):
        f = getattr(llama_cpp, name)
        if name.startswith("llama_") and callable(f) and not isinstance(f, type):  # its functions, not its structs
            got.append((llama_cpp, name, "llama_cpp"))
    for name in dir(V._call):
        if not name.startswith("_") and callable(getattr(V._call, name)):
            got.append((V._call, name, "llama_cpp"))
    for name in sorted(vars(llg.lib)):  # ctypes keeps each function it was asked for (llg._load's)
        if name.startswith("llg_"):
            got.append((llg.lib, name, "llguidance"))
    return got


def clocked(clock: CallClock) -> contextlib.AbstractContextManager[None]:
    """Every native call of `_targets` timed into `clock` while inside; as they were after."""
    return timing(clock._timer, _targets())


def calibrate(n: int = CALIBRATION_CALLS) -> tuple[float, float]:
    """The clock's own cost per call, on a C function that does next to nothing (`abs`): the
    seconds it adds inside a call's timed span, and in all (the cells' wall)."""
    clock = CallClock()
    g = clock.timed("llama_cpp", abs)
    for _ in range(2):  # the second pass is the one kept: the first warms the caches
        t0 = time.perf_counter()
        for _ in range(n):
            abs(-1)
        bare = time.perf_counter() - t0
        clock.seconds["llama_cpp"] = 0.0
        t0 = time.perf_counter()
        for _ in range(n):
            g(-1)
        wrapped = time.perf_counter() - t0
    inside = max(clock.seconds["llama_cpp"] - bare, 0.0) / n
    return inside, max(wrapped - bare, 0.0) / n


def _cells(analysis: str) -> tuple[str, list[str]]:
    """The notebook's parameters cell and its other code cells, as papermill sees them."""
    book = json.loads(params.notebook_file(analysis).read_text(encoding="utf-8"))
    code = [c for c in book["cells"] if c["cell_type"] == "code"]
    first = next(i for i, c in enumerate(code) if "parameters" in c.get("metadata", {}).get("tags", []))
    src = ["".join(c["source"]) for c in code]
    return src[first], src[:first] + src[first + 1 :]


def _shell() -> Any:
    # IPython's shell: only where the split runs, not where the floor reads its rows
    from IPython.core.interactiveshell import InteractiveShell

    class Shell(InteractiveShell):
        def enable_gui(self, gui: str | None = None) -> None:  # inline figures need no event loop
            pass

    shell = Shell.instance()
    with contextlib.redirect_stdout(io.StringIO()):
        shell.run_line_magic("matplotlib", "inline")
    return shell


def _run_cell(shell: Any, src: str) -> str:
    """Run one cell as the kernel would (its value formatted, figures drawn); its error, or ""."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        got = shell.run_cell(src, store_history=False)
    err = got.error_before_exec or got.error_in_exec
    return "" if err is None else f"{type(err).__name__}: {err}"


def split_one(
    shell: Any, clock: CallClock, it: Input, analysis: str, out: Path, cost: tuple[float, float]
) -> dict[str, Any]:
    """One analysis's notebook on `it` in `shell`, its vocab loaded already: its compute (the load
    and the clock's cost left out), each native kind's seconds, the rest, and its first error."""
    first, rest = _cells(analysis)
    _run_cell(shell, first)
    given = {"input": it.param(), "results_dir": str(out)}
    # as papermill injects them, after the notebook's own (Python literals: JSON's are not all)
    _run_cell(shell, "\n".join(f"{k} = {val!r}" for k, val in given.items()))
    before, calls_before = clock.snapshot()
    nb.take_times()
    t0 = time.perf_counter()
    errors = [e for e in (_run_cell(shell, src) for src in rest) if e]
    wall = time.perf_counter() - t0 - nb.take_times()["load"]
    after, calls_after = clock.snapshot()
    calls = calls_after - calls_before
    own = {k: after[k] - before[k] - calls[k] * cost[0] for k in after}
    compute = wall - sum(calls.values()) * cost[1]
    _run_cell(shell, "from llgbridge import nb as _nb\n_nb.between_notebooks()")
    return {
        "analysis": analysis,
        "input": it.name,
        "wall": compute,
        **own,
        "python": compute - sum(own.values()),
        "calls": sum(calls.values()),
        "error": errors[0] if errors else "",
    }


def split_input(
    shell: Any, clock: CallClock, name: str, out: Path, order: tuple[str, ...], cost: tuple[float, float]
) -> list[dict[str, Any]]:
    """The analyses of `order` on one input, in that order, in `shell`: a row each."""
    it = Input.make(name)
    try:  # the load, outside the clock and the cells, as the report counts it apart
        v = nb.cached_vocab(it.path, it.name, it.load_overrides())
    except Exception as e:  # noqa: BLE001 - the input's rows say it
        return [{"analysis": a, "input": name, "n_tokens": 0, "error": f"load: {e}"} for a in order]
    return [{**split_one(shell, clock, it, a, out, cost), "n_tokens": v.n_tokens} for a in order]


def measure_here(names: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Each INPROC analysis on each input (default: those the report runs it on), its compute split
    into INPROC_PARTS: {"rows": a row per (analysis, input), "cost": the clock's cost per call}.
    In this process, which the IPython shell changes for good (its own `__main__`, display hook,
    matplotlib backend): `inproc_split` runs it in a process of its own."""
    order = tuple(a for a in analyses.names() if a in INPROC)
    inputs = names or tuple(input_sets()["every"])
    for a in order:
        params.declared(a)  # a notebook whose parameters do not parse fails here, before any run
    cost = calibrate()
    shell = _shell()
    clock = CallClock()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="inproc-") as tmp, clocked(clock):
        for i, name in enumerate(inputs, 1):
            print(f"inproc split: {name} ({i} of {len(inputs)})", file=sys.stderr, flush=True)
            rows += split_input(shell, clock, name, Path(tmp), order, cost)
    return {"rows": rows, "cost": {"inside_us": 1e6 * cost[0], "all_us": 1e6 * cost[1]}}


def inproc_split(names: tuple[str, ...] | None = None) -> dict[str, Any]:
    """`measure_here` in a process of its own (`python -m llgbridge.measure.inproc_split`), its
    result read back from its stdout: the shell it runs the notebooks in replaces `__main__`, which
    multiprocessing's spawn then cannot prepare a child from (`make bench`'s what-if, after it)."""
    p = subprocess.run(
        [sys.executable, "-m", "llgbridge.measure.inproc_split", *(names or ())],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        check=False,
    )
    if p.returncode != 0:
        raise RuntimeError(f"the in-process split exited {p.returncode}: {p.stdout[-500:]}")
    got: dict[str, Any] = json.loads(p.stdout)
    return got


def per_analysis(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows that ran without an error, summed per analysis (INPROC's order)."""
    out = []
    for a in INPROC:
        mine = [r for r in rows if r["analysis"] == a and not r["error"]]
        if mine:
            keys = ("wall", "calls", *(k for k, _ in INPROC_PARTS))
            out.append({"analysis": a, "inputs": len(mine), **{k: sum(r[k] for r in mine) for k in keys}})
    return out


def inproc_table(rows: list[dict[str, Any]]) -> Any:
    return table(
        ["analysis", "inputs", "compute s", *(label for _, label in INPROC_PARTS), "native calls"],
        [
            [
                s["analysis"],
                s["inputs"],
                f"{s['wall']:.1f}",
                *(f"{s[k]:.1f} ({100 * s[k] / s['wall']:.0f}%)" for k, _ in INPROC_PARTS),
                s["calls"],
            ]
            for s in per_analysis(rows)
        ],
    )


@dataclass(frozen=True)
class InprocSplit(BenchPart):
    """`inproc_split`'s rows: per (analysis, input), its compute and INPROC_PARTS."""

    split: dict[str, Any]

    def rows(self) -> list[dict[str, object]]:
        out = []
        for r in self.split["rows"]:
            if r["error"]:
                continue
            bench = BENCH[r["analysis"]]
            out.append(csv_row(bench, r["input"], r["n_tokens"], "wall", r["wall"]))
            for k, _ in INPROC_PARTS:
                out.append(csv_row(bench, r["input"], r["n_tokens"], k, r[k], r[k] / r["wall"] if r["wall"] else None))
        return out

    def failures(self) -> list[str]:
        bad = [r for r in self.split["rows"] if r["error"]]
        return [f"inproc split: {r['analysis']} on {r['input']}: {r['error']}" for r in bad]

    def context(self) -> dict[str, Any]:
        rows = self.split["rows"]
        if not rows:
            return {"inproc_split": None}
        return {
            "inproc_split": {
                "table": inproc_table(rows),
                "inputs": len({r["input"] for r in rows}),
                "failed": self.failures(),
                "inside_us": f"{self.split['cost']['inside_us']:.2f}",
                "all_us": f"{self.split['cost']['all_us']:.2f}",
            }
        }


if __name__ == "__main__":
    json.dump(measure_here(tuple(sys.argv[1:]) or None), sys.stdout)
