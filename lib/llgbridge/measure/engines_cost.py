"""The other engines' cost, per engine (`make bench`, issue 46 "Cost").

The engines analysis runs each engine of its registry (lm-format-enforcer, outlines) on an input
in a forked process and records each one's `seconds` in its result (`RESULTS/engines/INPUT.json`);
its run's wall is in its timing file, beside every other analysis's. Issue 46's goals: the
engines analysis adds at most 15% to `make report`'s compute on 2 cores, and at most 3 s to a
what-if on llama-spm. The what-if's figure is read from what-ifs already run
(`reports/whatif/*/results/`, written by `make whatif`), none is run here.

What a user picking an engine pays, measured here (`parts`, issue 59): per engine of the registry
with an adapter (each engine added to `ENGINES` is measured without a change here), on llama-bpe
and gemma-4, in parts: importing the library, loading the vocab (`Llama(vocab_only=True)`), the
table (the adapter's `make_tokenizer_data`: the library's own builder), compiling the leak regex
(`walker`), one mask at position 0 (`allowed`) and one more after a step (`advance` of the
lowest token whose real piece is two lowercase letters, a prefix every engine must allow, then
`allowed`). An adapter's `allowed` is the library's mask call and its ids sorted into a list. The
yardstick is llguidance's compiled mask on the same parts: its own `lltokenizer_from_vocab` (the
sentinel bridge), `LLMatcher(tok, grammar_from_regex(regex))` and `compute_bitmask`. Each
measurement is a forked process of its own (no library imported in the bench's process, no cache
carried over), `REPEAT` times, the median kept.
"""

from __future__ import annotations

import importlib
import re
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..analyses.engines.compute import ENGINES, LEAK, LEAK_REGEX, Engine, load_llama, run_limited
from ..paths import REPORTS, RESULTS, vocab_path
from .benchmd import BenchPart, csv_row, table
from .recorded import WORKERS, Pool, Run, pool_runs, read_pool, read_runs, results_of
from .whatif_time import WHATIF_VOCAB

GOAL_SHARE = 0.15  # of make report's compute, on 2 cores
GOAL_WHATIF_S = 3.0  # in a what-if on llama-spm


PARTS_VOCABS = ("llama-bpe", "gemma-4")
PARTS = ("import", "load", "table", "compile", "mask", "step")
YARDSTICK = "llguidance"  # its compiled mask, through its own llama.cpp table (the sentinel bridge)
REPEAT = 3
STEP_PIECE = re.compile(rb"[a-z]{2}")


def step_token(llm: Any) -> int:
    """The lowest token whose real piece (`llama_token_to_piece(t, 0, false)`) is two lowercase
    letters: a legal start of `[.a-z]{2,6}!` on every vocab, so every engine's walk takes it."""
    import ctypes

    import llama_cpp

    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    buf = ctypes.create_string_buffer(64)
    for t in range(llama_cpp.llama_vocab_n_tokens(vocab)):
        n = llama_cpp.llama_token_to_piece(vocab, t, buf, len(buf), 0, False)
        if 0 < n and STEP_PIECE.fullmatch(buf.raw[:n]):
            return t
    raise ValueError("no token of two lowercase letters")


def _engine_parts(engine: Engine, path: str) -> dict[str, float]:
    """One engine's parts on one vocab, in seconds (in its own process)."""
    import llama_cpp  # noqa: F401 - every subject's `import` is its library's alone, llama-cpp-python's left out

    t = [time.perf_counter()]
    adapter = importlib.import_module(f"llgbridge.analyses.engines.adapters.{engine.adapter}")
    t.append(time.perf_counter())
    llm = load_llama(path, ())
    t.append(time.perf_counter())
    data = adapter.make_tokenizer_data(llm)
    t.append(time.perf_counter())
    w = data.walker(LEAK)  # the leak grammar in each engine's language (`adapters.Pattern`)
    t.append(time.perf_counter())
    w.allowed()
    t.append(time.perf_counter())
    tok = step_token(llm)  # not timed: the same token for every engine
    t0 = time.perf_counter()
    w.advance(tok)
    w.allowed()
    t.append(t[-1] + time.perf_counter() - t0)
    return {p: b - a for p, a, b in zip(PARTS, t, t[1:])}


def _yardstick_parts(path: str) -> dict[str, float]:
    """llguidance's compiled mask on the same parts (in its own process)."""
    import llama_cpp

    t = [time.perf_counter()]
    import llguidance
    import llguidance.llamacpp

    t.append(time.perf_counter())
    llm = load_llama(path, ())
    t.append(time.perf_counter())
    tok = llguidance.llamacpp.lltokenizer_from_vocab(llama_cpp.llama_model_get_vocab(llm.model))
    t.append(time.perf_counter())
    m = llguidance.LLMatcher(tok, llguidance.LLMatcher.grammar_from_regex(LEAK_REGEX))
    t.append(time.perf_counter())
    m.compute_bitmask()
    t.append(time.perf_counter())
    step = step_token(llm)
    t0 = time.perf_counter()
    m.consume_token(step)
    m.compute_bitmask()
    t.append(t[-1] + time.perf_counter() - t0)
    if m.is_error():
        raise RuntimeError(f"llguidance refused token {step}: {m.get_error()}")
    return {p: b - a for p, a, b in zip(PARTS, t, t[1:])}


def parts(vocabs: tuple[str, ...] = PARTS_VOCABS, repeat: int = REPEAT) -> list[dict[str, Any]]:
    """Per vocab, the yardstick then each engine with an adapter: the median of each part over
    `repeat` fresh processes, or the one-line error of the first that failed."""
    out = []
    for vocab in vocabs:
        path = str(vocab_path(vocab))
        subjects: list[tuple[str, Any, tuple[Any, ...]]] = [(YARDSTICK, _yardstick_parts, (path,))]
        subjects += [(e.name, _engine_parts, (e, path)) for e in ENGINES if e.adapter]
        for name, fn, args in subjects:
            runs, err = [], ""
            for _ in range(repeat):
                got, err = run_limited(fn, args, path)
                if got is None:
                    break
                runs.append(got)
            row: dict[str, Any] = {"vocab": vocab, "engine": name, "error": err if len(runs) < repeat else ""}
            if not row["error"]:
                row |= {p: statistics.median(r[p] for r in runs) for p in PARTS}
            out.append(row)
    return out


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


def _ms(x: float) -> str:
    return f"{1000 * x:.2f}"


def parts_context(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The parts' table: per vocab and subject, each part, and the mask against the yardstick's."""
    if not rows:
        return None
    base = {r["vocab"]: r for r in rows if r["engine"] == YARDSTICK and not r["error"]}
    out = []
    for r in rows:
        if r["error"]:
            out.append([r["vocab"], r["engine"], *["-"] * 7, r["error"]])
            continue
        y = base.get(r["vocab"])
        ratio = f"{r['mask'] / y['mask']:.0f}x" if y and y["mask"] else "-"
        secs = [f"{r[p]:.2f}" for p in ("import", "load", "table")]
        out.append([r["vocab"], r["engine"], *secs, _ms(r["compile"]), _ms(r["mask"]), _ms(r["step"]), ratio, ""])
    columns = ["vocab", "engine", "import s", "load s", "table s", "compile ms", "one mask ms", "next mask ms"]
    return {
        "table": table([*columns, "mask / llguidance's", "error"], out),
        "yardstick": YARDSTICK,
        "regex": LEAK_REGEX,
        "repeat": REPEAT,
    }


@dataclass(frozen=True)
class EnginesCost(BenchPart):
    """`engines_cost`'s figures (None where the engines analysis has no result) and each engine's
    table and mask in parts (`parts`)."""

    measured: dict[str, Any] | None
    parts: tuple[dict[str, Any], ...] = ()

    def rows(self) -> list[dict[str, object]]:
        return self._read_back() + self._parts_rows()

    def _parts_rows(self) -> list[dict[str, object]]:
        base = {r["vocab"]: r for r in self.parts if r["engine"] == YARDSTICK and not r["error"]}
        out = []
        for r in self.parts:
            if r["error"]:
                continue
            y = base.get(r["vocab"], {})
            for p in PARTS:
                ratio = r[p] / y[p] if y.get(p) else None
                out.append(csv_row("engines_parts", r["vocab"], 1, f"{r['engine']}:{p}", r[p], ratio))
        return out

    def failures(self) -> list[str]:
        return [f"engines_parts: {r['engine']} on {r['vocab']}: {r['error']}" for r in self.parts if r["error"]]

    def _read_back(self) -> list[dict[str, object]]:
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
        return {"engines_cost": engines_context(self.measured), "engines_parts": parts_context(list(self.parts))}
