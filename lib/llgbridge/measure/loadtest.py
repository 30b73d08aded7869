"""The real llama-server under concurrent requests, repeated: `make bench`'s load test.

    python -m llgbridge.measure.loadtest [--rounds 5] [--out reports]    # make bench runs it too

On every synthetic model and every build (upstream and fixed, each llguidance version), the server
notebook's cases one request at a time, then `server.load` `rounds` times, each on a fresh
server: `LOAD_REQUESTS` constrained requests over the notebook's `parallel` slots at once, every
answer judged from its tokens and compared with the server's own `content` (`analyses.server.judge.content_match`).

Writes, beside `bench.csv` (the report quotes them as the snapshot they are):
- `bench-server-load.csv`: one row per (model, llguidance, sampler), summed over the rounds, with
  the violations of each round (`violations_per_round`), so an outcome that comes and goes shows
  as a spread;
- `bench-server-load.md`: the same, with every violation the server's own content confirms, each
  with the server's command line and the request as a pasteable `curl`.

Why here and not in `make report`: how llama-server batches concurrent requests changes from run to
run, and with it what a random-weight model samples. A figure that varies between runs is reported
with its spread, never as a finding. An answer whose tokens and content disagree is this suite's
bug until shown otherwise: it is counted apart (`judge_disagrees`), and the run exits non-zero.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm import tqdm

from .. import params, synth
from ..analyses.server import compute as server
from ..analyses.server import llama_server
from ..errors import first_line
from ..gguf_meta import read_kv
from ..modelfile import ModelFile
from ..paths import DATA, REPORTS, write_atomic
from ..report import Table
from ..report.data import SERVER_LOAD_CSV
from ..report.templating import environment
from .benchmd import BenchPart

LOAD_REQUESTS = 32  # per round, over the server notebook's `parallel` slots
LOAD_ROUNDS = 5
SERVER_LOAD_MD = "bench-server-load.md"
COLUMNS = (
    "model",
    "llguidance",
    "sampler",
    "rounds",
    "requests",
    "parallel",
    "passed",
    "violations",
    "violations_per_round",
    "judge_disagrees",
    "other",
    "differ_from_sequential",
    "healthy_after",
    "llg_errors",
    "violating",
)


@dataclass
class LoadRun:
    rounds: int
    rows: list[dict[str, Any]] = field(default_factory=list)  # one per (model, llguidance, sampler), summed
    confirmed: list[dict[str, Any]] = field(
        default_factory=list
    )  # violations of a build but upstream, the content confirming
    failures: list[str] = field(default_factory=list)  # one line per model or round that could not run


def summed(loads: list[dict[str, Any]], rounds: int) -> list[dict[str, Any]]:
    """The rounds of each (model, llguidance, sampler) as one row; `violations_per_round` keeps
    each round's count, in order, and a round that did not run is absent from it."""
    by: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for x in loads:
        by.setdefault((x["model"], x["llguidance"], x["sampler"]), []).append(x)
    out = []
    for (model, llg, sampler), xs in sorted(by.items()):
        xs = sorted(xs, key=lambda x: x.get("round", 1))
        out.append(
            {
                "model": model,
                "llguidance": llg,
                "sampler": sampler,
                "rounds": len(xs),
                "requests": xs[0]["requests"],
                "parallel": xs[0]["parallel"],
                "passed": sum(x["passed"] for x in xs),
                "violations": sum(x["violations"] for x in xs),
                "violations_per_round": " ".join(str(x["violations"]) for x in xs),
                "judge_disagrees": sum(x.get("judge_disagrees", 0) for x in xs),
                "other": sum(x["other"] for x in xs),
                "differ_from_sequential": sum(x["differ_from_sequential"] for x in xs),
                "healthy_after": all(x["healthy_after"] for x in xs),
                "llg_errors": sum(x["llg_errors"] for x in xs),
                "violating": "; ".join(sorted({v for x in xs for v in x["violating"].split("; ") if v})[:3]),
            }
        )
    return out


def run(models_dir: Path = DATA / "models", rounds: int = LOAD_ROUNDS, say: Any = None) -> LoadRun:
    """The load test on every synthetic model in `models_dir`. A model whose run fails (its servers,
    or a disagreement between the judge and a server) is one line of `failures`; no server built:
    one line and no rows."""
    result = LoadRun(rounds)
    _, why = llama_server.built()
    if why:
        result.failures.append(f"server load test skipped: {why}")
        return result
    p = params.declared("server")
    opts = server.RunOptions(
        p["prompt"],
        tuple(p["samplers"]),
        p["temperature"],
        p["seed"],
        p["max_tokens"],
        LOAD_REQUESTS,
        p["parallel"],
        candidates=(),
        load_rounds=rounds,
    )
    loads: list[dict[str, Any]] = []
    # a model made for an input loaded with key overrides (synth.OVERRIDES_KEY) is that input's, not a fixture's
    plain = [m for m in sorted(models_dir.glob("synthetic-*.gguf")) if synth.OVERRIDES_KEY not in read_kv(m)[0]]
    for path in tqdm(plain, desc="server under load", file=sys.stderr):
        name = path.stem.removeprefix("synthetic-")
        lines: list[str] = []
        try:
            got = server.run(name, ModelFile.read(path), True, None, list(p["cases"]), opts, say=lines.append)
        except Exception as e:  # noqa: BLE001 - one model's failure is one line; the others still run
            result.failures.append(f"{name}: {first_line(str(e)) or type(e).__name__}")
            continue
        result.failures += [
            f"{name}: {ln.strip()}"
            for ln in lines
            if ln.strip().startswith("load round") and ":" in ln and "requests over" not in ln
        ]
        loads += [x.row() for x in got.loads]
        # upstream's violations under load are the bugs the PR fixes, the same as one at a time
        # (`differ_from_sequential`); a violation of any other build would be news: each is kept
        # with its request, one entry per (build, case, text) and the rounds it came in
        for v in got.load_violations:
            if v["server"].startswith("llama-server-upstream-"):
                continue
            key = (path.name, v["server"], v["case"], v["output"])
            seen = next((c for c in result.confirmed if (c["model"], c["server"], c["case"], c["output"]) == key), None)
            if seen is None:
                result.confirmed.append({"model": path.name, **v, "rounds": [v["round"]]})
            else:
                seen["rounds"].append(v["round"])
        if say is not None:
            say(f"{name}: {len(got.loads)} load rounds")
    result.rows = summed(loads, rounds)
    return result


def table(rows: list[dict[str, Any]]) -> Table:
    return Table(pd.DataFrame([[str(r[c]) for c in COLUMNS] for r in rows], columns=list(COLUMNS)))


def render(result: LoadRun) -> str:
    env = environment()
    fixed = [r for r in result.rows if r["sampler"] == "fixed"]
    return (
        env.get_template("bench-server-load.md.j2")
        .render(
            run=result,
            requests=LOAD_REQUESTS,
            parallel=result.rows[0]["parallel"] if result.rows else 4,
            table=table(result.rows).markdown if result.rows else "",
            models=len({r["model"] for r in result.rows}),
            builds=len(result.rows),
            fixed_violations=sum(r["violations"] for r in fixed),
            upstream_violations=sum(r["violations"] for r in result.rows if r["sampler"] == "upstream"),
            disagrees=sum(r["judge_disagrees"] for r in result.rows),
            fixed_requests=sum(r["rounds"] * r["requests"] for r in fixed),
            healthy=all(r["healthy_after"] for r in result.rows),
        )
        .rstrip("\n")
        + "\n"
    )


def write(out: Path, result: LoadRun) -> None:
    """`bench-server-load.csv` (when any row ran) and `bench-server-load.md`."""
    if result.rows:
        write_atomic(out / SERVER_LOAD_CSV, table(result.rows).csv)
    write_atomic(out / SERVER_LOAD_MD, render(result))


def failed(result: LoadRun) -> bool:
    """The run must not be taken as it is: an answer the judge and the server disagree on, or a
    model or round that did not run."""
    return bool(result.failures) or any(r["judge_disagrees"] for r in result.rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m llgbridge.measure.loadtest", description=__doc__.splitlines()[0])
    ap.add_argument(
        "--rounds", type=int, default=LOAD_ROUNDS, help=f"load-test repetitions per build (default {LOAD_ROUNDS})"
    )
    ap.add_argument("--out", type=Path, default=REPORTS)
    a = ap.parse_args(argv)
    result = run(rounds=a.rounds)
    write(a.out, result)
    for line in result.failures:
        print(f"loadtest: {line}", file=sys.stderr)
    print(f"wrote {a.out / SERVER_LOAD_MD}")
    return 1 if failed(result) else 0


@dataclass(frozen=True)
class ServerLoad(BenchPart):
    """The load test's run (None where it did not run): a paragraph of bench.md, and its own
    table and page beside it (`write`)."""

    run: LoadRun | None

    def context(self) -> dict[str, Any]:
        if self.run is None:
            return {"server_load": None}
        rows = self.run.rows
        return {
            "server_load": {
                "md": SERVER_LOAD_MD,
                "rounds": self.run.rounds,
                "fixed_violations": sum(r["violations"] for r in rows if r["sampler"] == "fixed"),
                "disagrees": sum(r["judge_disagrees"] for r in rows),
                "builds": len(rows),
            }
        }

    def write(self, out: Path) -> None:
        if self.run is not None:
            write(out, self.run)

    def failures(self) -> list[str]:
        return [f"load test: {line}" for line in self.run.failures] if self.run is not None else []

    def failed(self) -> bool:
        return self.run is not None and failed(self.run)


if __name__ == "__main__":
    raise SystemExit(main())
