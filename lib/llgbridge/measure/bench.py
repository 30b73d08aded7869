"""Benchmark the Python census against the same loop in C, and time the bridge builds.

    python -m llgbridge.measure.bench [--out reports] [--repeat 3]
    python -m llgbridge.measure.bench --only census [--repeat 5]   # just Python vs C, printed, nothing written

First the census in Python against the same loop in C (`census_c`): both must agree on every
vocab's counts, or nothing is written. Then, in this process: the optimisation ablation (each
census stage once over all vocabs) and `bridges.make_bridge` per vocab and variant (`ablation`); the
report's regeneration, the real `make report`, serial and -j2, from empty results, on today's
content and on everything (`regen`), with its overhead split from the analyses' own compute; the
real llama-server under concurrent requests (`loadtest`); the mask path in parts, the mask in
generation on synthetic models and the real decode step on each real model (`decode_time`); the
corpus sample's masks (`corpus_time`); the native, server and in-process analyses in parts
(`native_split`, `server_split`, `inproc_split`), a what-if end to end (`whatif_time`), a 30-file
`make audit` (`audit_cost`) and `make test`'s pytest (`tests_time`).
Last, read back from what `make report` left in data/results (its runs' timing files and
results), nothing run: the report's floor (`floor`), the other engines' cost (`engines_cost`,
which also times each engine's table and mask in parts against llguidance's) and the report's
scale (`scale`).

Each measurement returns a `benchmd.BenchPart` that knows its rows of `reports/bench.csv`, its
sections of `reports/bench.md` (through `templates/bench.md.j2`, its tables the report's
`Table`s) and its files beside them; `write_reports` writes the parts.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

from ..paths import REPORTS, write_atomic, write_json
from . import census_c, loadtest, quotes, regen
from .ablation import measure_ablation, measure_builds
from .audit_cost import AuditCost, audit_cost
from .benchmd import BenchPart, csv_text, render_parts
from .census_c import Census, compile_c, parse
from .corpus_time import CorpusTime, corpus_mask_time, corpus_vocabs
from .decode_time import Decode, Generation, MaskPath, generation_timing, mask_path_timing, real_decode_timing
from .engines_cost import PARTS_VOCABS, EnginesCost, engines_cost, parts
from .floor import Floor, floor
from .inproc_split import InprocSplit, inproc_split
from .native_split import NATIVE_SPLIT_VOCABS, NativeSplit, native_split
from .scale import Scale, scale
from .server_split import SERVER_SPLIT_MODELS, ServerSplit, server_split
from .tests_time import TestsTime, tests_time
from .whatif_time import Whatif, whatif_time

# tests/test_models compiles and reads the C census through this module
__all__ = ["compile_c", "main", "parse", "write_reports"]


@dataclass(frozen=True)
class Options:
    """The command line, as the measurements read it."""

    out: Path
    repeat: int
    vocabs: str | None  # comma-separated names: the census's fixtures, or an --only split's vocabs
    regen: tuple[str, ...]
    corpus_vocabs: str | None  # space-separated names


def _names(o: Options, default: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(o.vocabs.split(",")) if o.vocabs else default


def measure_census(o: Options) -> Census:
    return census_c.measure(census_c.census_paths(o.vocabs), o.repeat)


def census_of(done: dict[str, BenchPart]) -> Census:
    """The census part, measured first: the ablation and the builds time its vocabs."""
    census = done["census"]
    assert isinstance(census, Census)
    return census


# the splits whose floor shares the floor takes, from the same run
SPLITS = ("native_split", "server_split", "inproc_split")
# after the census, in the order they run; each gets the command line and the parts measured before it
MEASUREMENTS: tuple[tuple[str, Callable[[Options, dict[str, BenchPart]], BenchPart]], ...] = (
    ("ablation", lambda o, d: measure_ablation(census_of(d))),
    ("builds", lambda o, d: measure_builds(census_of(d), o.repeat)),
    ("regen", lambda o, d: regen.Regens(regen.measure(o.regen) if o.regen else None)),
    ("server_load", lambda o, d: loadtest.ServerLoad(loadtest.run())),
    ("mask_path", lambda o, d: MaskPath(mask_path_timing())),
    ("decode", lambda o, d: Decode(real_decode_timing())),
    ("generation", lambda o, d: Generation(generation_timing())),
    ("corpus_time", lambda o, d: CorpusTime(corpus_mask_time(corpus_vocabs(o.corpus_vocabs)))),
    ("native_split", lambda o, d: NativeSplit(native_split())),
    ("server_split", lambda o, d: ServerSplit(server_split())),
    ("inproc_split", lambda o, d: InprocSplit(inproc_split())),
    ("whatif", lambda o, d: Whatif(whatif_time())),
    ("audit", lambda o, d: AuditCost(audit_cost(split_rows=[r for k in SPLITS for r in d[k].rows()]))),
    ("tests", lambda o, d: TestsTime(tests_time())),
    # read back from what make report (and make whatif) left in data/results: nothing run
    ("floor", lambda o, d: Floor(floor(split_rows=[r for k in SPLITS for r in d[k].rows()]))),
    ("engines_cost", lambda o, d: EnginesCost(engines_cost(), tuple(parts(repeat=o.repeat)))),
    ("scale", lambda o, d: Scale(scale())),
)
# bench.csv's rows in the order of the snapshots made before the parts were split, so that a new
# run diffs row for row against the committed one (bench.md's order is the template's)
CSV_ORDER = (
    "census",
    "ablation",
    "builds",
    "mask_path",
    "decode",
    "regen",
    "generation",
    "server_split",
    "whatif",
    "native_split",
    "corpus_time",
    "server_load",
    "floor",
    "engines_cost",
    "scale",
    "tests",
    "inproc_split",
    "audit",
)
# --only: the parts run, their sections printed, nothing written
ONLY: dict[str, Callable[[Options], list[BenchPart]]] = {
    "census": lambda o: [measure_census(o)],
    "native": lambda o: [NativeSplit(native_split(_names(o, NATIVE_SPLIT_VOCABS)))],
    "server": lambda o: [ServerSplit(server_split(_names(o, SERVER_SPLIT_MODELS)))],
    "inproc": lambda o: [InprocSplit(inproc_split(tuple(o.vocabs.split(",")) if o.vocabs else None))],
    "whatif": lambda o: [Whatif(whatif_time())],
    "audit": lambda o: [AuditCost(audit_cost())],
    "tests": lambda o: [TestsTime(tests_time())],
    "floor": lambda o: [Floor(floor())],
    "engines": lambda o: [EnginesCost(engines_cost(), tuple(parts(_names(o, PARTS_VOCABS), o.repeat)))],
    "scale": lambda o: [Scale(scale())],
}


def measure_all(o: Options) -> list[BenchPart]:
    """Every measurement, the census first (it fails the run where Python and C disagree), in CSV_ORDER."""
    done: dict[str, BenchPart] = {"census": measure_census(o)}
    for key, measure in MEASUREMENTS:
        done[key] = measure(o, done)
    return [done[k] for k in CSV_ORDER]


def write_reports(out: Path, parts: Sequence[BenchPart]) -> None:
    """bench.csv (each part's rows, in order), each part's own files, then bench.md."""
    write_atomic(out / "bench.csv", csv_text([r for p in parts for r in p.rows()]))
    for p in parts:
        p.write(out)
    write_atomic(out / "bench.md", render_parts(parts))


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m llgbridge.measure.bench", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPORTS, help="where bench.csv and bench.md go (default: reports)")
    ap.add_argument("--repeat", type=int, default=3, help="repetitions; medians are reported (default: 3)")
    ap.add_argument("--vocabs", help="comma-separated fixture names (default: all in data/vocabs)")
    ap.add_argument(
        "--regen",
        nargs="*",
        default=["today", "full"],
        metavar="CONTENT",
        choices=["today", "full"],
        help="the report regenerations to time, serial and -j2 (default: today full; none: --regen)",
    )
    ap.add_argument(
        "--corpus-vocabs",
        metavar="NAMES",
        help=(
            "the corpus sample's vocabs, space-separated, for its mask-time figure (default: those with a corpus "
            "result)"
        ),
    )
    ap.add_argument(
        "--only",
        choices=list(ONLY),
        help=(
            "run only this part and print its section of bench.md; writes nothing (census: Python vs C; native, "
            "server: that analysis in parts; inproc: the in-process analyses in parts; whatif: make whatif end to end; "
            "audit: make audit on 30 files; tests: make test's pytest, timed; "
            "engines: each engine's table and mask in parts, run, and its cost read back from data/results; "
            "floor, scale: read back from data/results, nothing run)"
        ),
    )
    ap.add_argument(
        "--splice",
        action="store_true",
        help=(
            "with --only: put the part, measured again, in place of its rows of bench.csv and its sections of bench.md "
            "(each such section says the code it was measured at); the rest stays the last full run's"
        ),
    )
    return ap


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Whatever is written to stdout meanwhile (the parts' progress, their processes' output: a
    what-if's "report written to") goes to stderr instead, so that `--only`'s stdout is its section
    of bench.md alone."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with redirect_stdout(sys.stderr):  # where sys.stdout is not fd 1 (a test's capture)
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def splice(out: Path, key: str, parts: Sequence[BenchPart], code: str) -> None:
    """`parts` (`--only key`), measured again alone, in place of what the last full run wrote of
    them: their benchmarks' rows of bench.csv, where the first of them stood, and their sections of
    bench.md, each saying at which code it was measured again; the rest of both as they were."""
    new = [r for p in parts for r in p.rows()]
    names = {str(r["benchmark"]) for r in new} | set(SPLICED.get(key, ()))
    with (out / "bench.csv").open(encoding="utf-8") as f:
        old: list[dict[str, object]] = list(csv.DictReader(f))
    at = next((i for i, r in enumerate(old) if r["benchmark"] in names), len(old))
    kept = [r for r in old if r["benchmark"] not in names]
    write_atomic(out / "bench.csv", csv_text(kept[:at] + new + kept[at:]))
    page = (out / "bench.md").read_text(encoding="utf-8")
    said = (
        f"*Measured again alone at {code} (`python -m llgbridge.measure.bench --only {key} --splice`); the rest "
        "of this page at the code its first lines name.*\n\n"
    )
    for section in re.split(r"(?m)^(?=## )", render_parts(parts)):
        if not section.startswith("## "):
            continue
        heading, body = section.split("\n", 1)
        found = re.search(rf"(?ms)^{re.escape(heading)}\n.*?(?=^#{{1,2}} |\Z)", page)
        text = body.strip("\n")
        fresh = f"{heading}\n\n{said}{text}\n\n"
        page = page[: found.start()] + fresh + page[found.end() :] if found else page.rstrip("\n") + "\n\n" + fresh
    write_atomic(out / "bench.md", page.rstrip("\n") + "\n")


# the benchmarks a part's rows may hold beyond those its new rows name: an engine that fails now
# writes no row, and its old one must not stay
SPLICED: dict[str, tuple[str, ...]] = {"engines": ("engines_cost", "engines_whatif", "engines_parts")}


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    o = Options(args.out, args.repeat, args.vocabs, tuple(args.regen), args.corpus_vocabs)
    if args.only:
        with stdout_to_stderr():
            measured = ONLY[args.only](o)
        if args.splice:
            splice(o.out, args.only, measured, census_c.code())
            print(f"spliced {args.only} into {o.out / 'bench.csv'} and {o.out / 'bench.md'}")
        else:
            print(render_parts(measured), end="")
        return 0
    parts = measure_all(o)
    write_reports(o.out, parts)
    # the guide's quotes on real weights: a real model's words depend on the CPU, so, like every
    # timing here, they are a dated snapshot the report quotes (`quotes`)
    snap = quotes.snapshot()
    if snap["inputs"]:
        write_json(o.out / quotes.SNAPSHOT, snap)
    print(
        f"wrote {o.out / 'bench.csv'} and {o.out / 'bench.md'}" + (f" and {quotes.SNAPSHOT}" if snap["inputs"] else "")
    )
    for p in parts:
        for line in p.failures():
            print(f"bench: {line}", file=sys.stderr)
    return 1 if any(p.failed() for p in parts) else 0


if __name__ == "__main__":
    raise SystemExit(main())
