"""The native analysis in parts (`make bench`, issue 33): `native.analyse` on a vocab as the report
runs it, its wall split where the calls into the compiled programs and the port are made."""

from __future__ import annotations

import statistics
import subprocess
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from .. import nb, params
from ..analyses.native import compute as native
from ..analyses.native import result as R
from ..analyses.native import trace as T
from ..analyses.native.logs import program_env
from ..inputs import Input
from ..vocab import Vocab
from .benchmd import BenchPart, csv_row, table
from .calls import SelfTimer
from .calls import timing as timed_calls

NATIVE_SPLIT_VOCABS = ("bert-bge", "llama-bpe", "gemma3-270m")  # 31k, 128k and 262k tokens
# native.analyse's wall in parts (key, label); a compiled process's setup is estimated per
# (llguidance, sampler) from the harness run with no job (its start and vocab load) and with one
# position-0 job (adding the sampler's tokenizer build and one grammar), medians of three
NATIVE_PARTS = (
    ("harness_setup", "harness: process starts and vocab loads (floor)"),
    ("harness_tokenizer", "harness: tokenizer builds, one per sampler a process serves (floor)"),
    ("test_work", "llama.cpp's tests, in the harness's children (floor)"),
    ("harness_work", "harness: the walks, and reading them back (floor)"),
    ("test_own", "llama.cpp's tests in binaries of their own, where no harness serves them (floor)"),
    ("special", "bug C's walks in harness runs of their own (floor)"),
    ("bridges", "the port's bridge builds"),
    ("port", "the port's walks (port_trace, differential)"),
    ("other", "the rest: jobs, causes, bug D rows"),
)
# beside them, in the same run: the same tests each in a binary of its own, as analyse ran them
# before the harness served them (issue 33), each process starting, loading and building anew
NATIVE_BEFORE = ("tests_own_binaries", "before: the same tests, each in a binary of its own")
# each module's own name for what it calls: the result module's, and the trace module's for the
# harness's own fallbacks (a run of its own for a sampler or a test it could not serve)
WRAPPED = {
    (R, "harness_serve"): "harness_serve",
    (R, "special_literal_rows"): "special",
    (R, "differential"): "port",
    (R, "port_traces"): "port",
    (T, "harness"): "harness",
    (T, "run_test"): "test",
}


@dataclass(frozen=True)
class Call:
    """One timed call: its part, the samplers the compiled process served, its llguidance, its own
    seconds (the timed calls inside it left out) and its tests' seconds."""

    part: str
    samplers: tuple[str, ...]
    llg: str
    seconds: float
    tests: float


def served(part: str, a: tuple[Any, ...]) -> tuple[str, ...]:
    """The samplers a compiled process served, from the call's arguments."""
    if part == "test":
        return (str(a[1]),)
    if part == "harness":
        return (str(a[0]),)
    return tuple(a[0]) if part == "harness_serve" else ()


@dataclass
class CallLog:
    """The timed calls of one `analyse`; a call inside another counts as its own, not the outer's
    (a harness run inside bug C's rows counts there, not as the differential's): the one timer,
    `calls.SelfTimer`."""

    calls: list[Call] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._timer = SelfTimer(self._add)

    def _add(self, part: str, under: str, own: float, a: tuple[Any, ...], k: dict[str, Any], got: Any) -> None:
        tag = "special" if part == "harness" and under == "special" else part.removesuffix("_serve")
        tests = sum(got.test_seconds.values()) if isinstance(got, native.Served) else 0.0
        self.calls.append(Call(tag, served(part, a), str(k.get("llg") or ""), own, tests))

    def timed(self, part: str, f: Callable[..., Any]) -> Callable[..., Any]:
        return self._timer.wrap(part, f)


def timing(log: CallLog) -> AbstractContextManager[None]:
    """WRAPPED timed into `log` while inside, as they were after."""
    return timed_calls(log._timer, [(mod, name, part) for (mod, name), part in WRAPPED.items()])


def probe(v: Vocab, sampler: str, llg: str, jobs: str) -> float:
    """Median seconds of three harness runs on `v` serving `sampler` with `jobs` (none: start and load alone)."""
    exe = native.bin_dir(llg or None) / "harness"
    runs = []
    for _ in range(3):
        t = time.perf_counter()
        subprocess.run(
            [str(exe), str(v.path)],
            input=(f"sampler {sampler}\n" + jobs if jobs else "").encode(),
            capture_output=True,
            env=program_env(v.overrides),
        )
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def setups(v: Vocab, calls: list[Call], leak: str) -> dict[tuple[str, str], tuple[float, float]]:
    """Per (sampler, llguidance) a harness process served: its seconds with no job and with one."""
    return {
        (s, c.llg): (probe(v, s, c.llg, ""), probe(v, s, c.llg, leak))
        for c in calls
        if c.part in ("harness", "special")
        for s in c.samplers
    }


def split(calls: list[Call], setup: dict[tuple[str, str], tuple[float, float]], wall: float) -> dict[str, float]:
    """`wall` in NATIVE_PARTS, and `processes`: the compiled processes started."""
    parts = dict.fromkeys((k for k, _ in NATIVE_PARTS), 0.0)
    n_procs = 0
    for c in calls:
        if c.part in ("test", "harness") or (c.part == "special" and c.samplers):
            n_procs += 1
        if c.part == "harness":
            # one start and vocab load per process, one tokenizer build per sampler it served
            empty = setup[c.samplers[0], c.llg][0]
            tokenizers = sum(setup[s, c.llg][1] - setup[s, c.llg][0] for s in c.samplers)
            parts["harness_setup"] += empty
            parts["harness_tokenizer"] += tokenizers
            parts["test_work"] += c.tests
            parts["harness_work"] += c.seconds - empty - tokenizers - c.tests
        elif c.part == "test":
            parts["test_own"] += c.seconds
        elif c.part in ("special", "bridges", "port"):
            parts[c.part] += c.seconds
    parts["other"] = wall - sum(parts.values())
    return {"processes": n_procs, **parts}


def split_one(name: str, p: dict[str, Any], log: CallLog, make_bridge: Callable[..., Any]) -> dict[str, Any]:
    """`native.analyse` on `name` with the notebook's parameters `p`, in parts, then its tests
    each in a binary of their own."""
    v = nb.load_vocab(Input.make(name))
    log.calls.clear()
    t0 = time.perf_counter()
    res = R.analyse(v, p["literal"], p["leak_grammar"], walks=p["walks"], seed=p["seed"], make_bridge=make_bridge)
    wall = time.perf_counter() - t0
    leak = native.Job("leak", p["leak_grammar"], ()).line()
    parts = split(log.calls, setups(v, log.calls, leak), wall)
    t1 = time.perf_counter()
    for t in res.tests:
        native.run_test(t.test, t.sampler, v.path, llg=t.llguidance or None, overrides=v.overrides)
    before = time.perf_counter() - t1
    return {
        "vocab": name,
        "n_tokens": v.n_tokens,
        "wall": wall,
        **parts,
        NATIVE_BEFORE[0]: before,
        "tests": len(res.tests),
    }


def native_split(vocabs: tuple[str, ...] = NATIVE_SPLIT_VOCABS) -> list[dict[str, Any]]:
    """`native.analyse` on each vocab with the notebook's defaults, its wall split into
    NATIVE_PARTS (one row per vocab: `n_tokens`, `wall`, `processes`, each part's seconds, and
    NATIVE_BEFORE's); empty where the native parts are not built. Each call into the compiled
    programs and the port is timed where `analyse` makes it, its own seconds only (a harness run
    inside bug C's rows counts there, not as the differential's)."""
    if native.unavailable():
        return []
    p = params.declared("native")
    log = CallLog()
    with timing(log):
        make_bridge = log.timed("bridges", nb.bridge)
        return [split_one(name, p, log, make_bridge) for name in vocabs]


def native_split_table(rows: list[dict[str, Any]]) -> Any:
    """NATIVE_PARTS down, the vocabs across: seconds and share of each vocab's wall; last, the
    tests as they ran before, each in a binary of its own, against what they cost now."""
    return table(
        ["part", *(f"{r['vocab']} ({r['n_tokens']})" for r in rows)],
        [
            ["wall s (processes)", *(f"{r['wall']:.1f} ({r['processes']})" for r in rows)],
            *[[label, *(f"{r[k]:.2f} ({100 * r[k] / r['wall']:.0f}%)" for r in rows)] for k, label in NATIVE_PARTS],
            [
                f"{NATIVE_BEFORE[1]} (processes), against the tests now",
                *(f"{r[NATIVE_BEFORE[0]]:.2f} ({r['tests']}) vs {r['test_work'] + r['test_own']:.2f}" for r in rows),
            ],
        ],
    )


@dataclass(frozen=True)
class NativeSplit(BenchPart):
    """`native_split`'s rows, one per vocab; none where the native parts are not built."""

    splits: list[dict[str, Any]]

    def rows(self) -> list[dict[str, object]]:
        out = []
        for r in self.splits:
            out.append(csv_row("native_part", r["vocab"], r["n_tokens"], "wall", r["wall"]))
            for k, _ in [*NATIVE_PARTS, NATIVE_BEFORE]:
                out.append(csv_row("native_part", r["vocab"], r["n_tokens"], k, r[k], r[k] / r["wall"]))
        return out

    def context(self) -> dict[str, Any]:
        return {"native_split": {"table": native_split_table(self.splits)} if self.splits else None}
