"""The census in Python against the same loop in C (`make bench`'s first part).

`bench/census.c` is compiled with `cc` against the libllama that llama-cpp-python installed (so
both sides run the same native code) into `data/bench/`. Each repetition then runs, as two
child processes over all the fixtures, the C loop and `run_census` (`census_worker`), in
alternating order so that a noisy machine slows both alike; per-vocab seconds (load + census +
free, timed inside each process) and the processes' wall and CPU seconds are medians over the
repetitions, and so is each part of a process's wall (start, load, compute, free, write and
exit; both programs print a `ready` line after their start-up). Both sides must agree on every
vocab's differing and lost-leading-space counts, or nothing is written.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import resource
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ..cbuild import llama_dirs
from ..gguf_meta import check_tokenizer, read_kv
from ..paths import DATA, ROOT, VOCABS, vocab_path
from .benchmd import BenchPart, csv_row, table
from .census_worker import now

SOURCE = ROOT / "bench" / "census.c"
BUILD = DATA / "bench"
GOAL = 1.3  # issue 47's target for python/C over all fixtures (issue 15 set 1.5)


@dataclass(frozen=True)
class Line:
    """One vocab's result line, as both census programs print it."""

    vocab: str
    n_tokens: int
    differing: int
    lost: int
    seconds: float  # load + census + free
    load: float  # the part of `seconds` spent loading (C: llama_model_load_from_file; Python: `Vocab(path)`)
    free: float  # the part spent in llama_model_free

    @property
    def compute(self) -> float:
        return self.seconds - self.load - self.free


# a census process in parts: (key, label); `start` and `write` are what lies outside the per-vocab timing
PARTS = (
    ("start", "process start to the first vocab: interpreter and imports (C: exec, libllama, backend init)"),
    ("load", "vocab load: llama_model_load_from_file (Python: `Vocab`, with its checks before the load)"),
    ("compute", "census compute (C: the loop)"),
    ("free", "free: llama_model_free"),
    ("write", "write and exit: the result lines, process teardown"),
)


@dataclass(frozen=True)
class CensusRun:
    lines: dict[str, Line]
    wall: float
    cpu: float
    start: float  # from the spawn to the process's `ready` line

    def parts(self) -> dict[str, float]:
        """Seconds per part (PARTS); they add up to `wall`."""
        lines = self.lines.values()
        timed = sum(x.seconds for x in lines)
        return {
            "start": self.start,
            "load": sum(x.load for x in lines),
            "compute": sum(x.compute for x in lines),
            "free": sum(x.free for x in lines),
            "write": self.wall - self.start - timed,
        }


def compile_c() -> Path:
    include, lib = llama_dirs()
    BUILD.mkdir(parents=True, exist_ok=True)
    exe, tmp = BUILD / "census", BUILD / ".census.tmp"
    cmd = [
        "cc",
        "-O2",
        "-Wall",
        f"-I{include}",
        str(SOURCE),
        f"-L{lib}",
        f"-Wl,-rpath,{lib}",
        "-lllama",
        "-o",
        str(tmp),
    ]
    subprocess.run(cmd, check=True)
    os.replace(tmp, exe)  # a failed compile leaves the previous binary, never half of one
    return exe


def parse(out: str) -> dict[str, Line]:
    """The per-vocab lines of a census program's output (its `ready` line left out)."""
    lines = {}
    for row in out.splitlines():
        if row.startswith("ready "):
            continue
        name, n, d, lost, s, load, free = row.split()
        lines[name] = Line(name, int(n), int(d), int(lost), float(s), float(load), float(free))
    return lines


def ready_at(out: str) -> float:
    """The CLOCK_MONOTONIC time of a census program's `ready` line."""
    return next(float(row.split()[1]) for row in out.splitlines() if row.startswith("ready "))


def run_child(cmd: list[str]) -> CensusRun:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = now()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = now() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return CensusRun(parse(p.stdout), wall, cpu, ready_at(p.stdout) - t0)


def check_seconds(paths: list[Path], repeat: int) -> float:
    """Median seconds, over all `paths`, of the checks `Vocab` runs before llama.cpp's load
    (`read_kv` + `check_tokenizer`), timed apart in this process: the worker times the load whole."""
    times = []
    for _ in range(repeat):
        t0 = now()
        for p in paths:
            check_tokenizer(p, read_kv(p)[0])
        times.append(now() - t0)
    return statistics.median(times)


def check_agree(py: CensusRun, c: CensusRun) -> None:
    bad = [
        f"{n}: python {py.lines.get(n)} vs C {c.lines[n]}"
        for n in c.lines
        if n not in py.lines
        or (py.lines[n].n_tokens, py.lines[n].differing, py.lines[n].lost)
        != (c.lines[n].n_tokens, c.lines[n].differing, c.lines[n].lost)
    ]
    if bad or py.lines.keys() != c.lines.keys():
        raise SystemExit(
            "python and C census disagree:\n" + "\n".join(bad or [f"{sorted(py.lines)} vs {sorted(c.lines)}"])
        )


def versions() -> dict[str, str]:
    cc = subprocess.run(["cc", "--version"], capture_output=True, text=True).stdout.splitlines()
    out = {"python": platform.python_version(), "cc": cc[0] if cc else "?"}
    for dist in ("llama_cpp_python", "llguidance"):
        out[dist] = importlib.metadata.version(dist)
    return out


def code() -> str:
    """The suite's code this run measured: its commit, and whether tracked files differed from it
    when the run began, so that every figure of bench.md names the code that made it."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()

    try:
        sha, changed = git("rev-parse", "--short=12", "HEAD"), git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return "not recorded (not a git checkout)"
    return f"commit {sha}" + (", with uncommitted changes to tracked files" if changed else "")


def machine(repeat: int) -> dict[str, str]:
    """The machine, its load now, the versions and the suite's code, for the census section's header."""
    return {
        "machine": f"{platform.platform()} {platform.machine()}",
        "nproc": str(os.cpu_count()),
        "loadavg": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "repeat": str(repeat),
        "code": code(),
        **versions(),
    }


def meta_context(meta: dict[str, str]) -> dict[str, str]:
    return {
        **meta,
        "versions": ", ".join(
            f"{k} {v}" for k, v in meta.items() if k not in ("machine", "nproc", "loadavg", "repeat", "code")
        ),
    }


def median_run(runs: list[CensusRun]) -> tuple[dict[str, float], float, float]:
    names = runs[0].lines
    per = {n: statistics.median(r.lines[n].seconds for r in runs) for n in names}
    return per, statistics.median(r.wall for r in runs), statistics.median(r.cpu for r in runs)


def median_parts(runs: list[CensusRun]) -> dict[str, float]:
    """Each part's median over the runs (so the medians need not add up to the median wall)."""
    return {k: statistics.median(r.parts()[k] for r in runs) for k, _ in PARTS}


@dataclass(frozen=True)
class Census(BenchPart):
    """Both sides' runs, in the order they ran (repetition i's Python run beside its C run), and
    the checks before Python's load, timed apart; `meta` the machine, read before the runs."""

    paths: list[Path]
    py: list[CensusRun]
    c: list[CensusRun]
    checks: float
    meta: dict[str, str]

    @property
    def ref(self) -> dict[str, Line]:
        """Each vocab's counts (both sides agree on them) and size, in the fixtures' order."""
        return self.c[0].lines

    @property
    def total_tokens(self) -> int:
        return sum(x.n_tokens for x in self.ref.values())

    @property
    def c_work(self) -> float:
        """The C loop's median seconds over all vocabs, their load left out (loop + free)."""
        return statistics.median(sum(x.seconds - x.load for x in r.lines.values()) for r in self.c)

    def rows(self) -> list[dict[str, object]]:
        return census_rows(self.ref, self.py, self.c, self.checks)

    def context(self) -> dict[str, Any]:
        return {"meta": meta_context(self.meta), "census": census_context(self.ref, self.py, self.c, self.checks)}


def census_paths(vocabs: str | None) -> list[Path]:
    """The fixtures to run: `vocabs` (comma-separated names), or every one in data/vocabs."""
    paths = [vocab_path(n) for n in vocabs.split(",")] if vocabs else sorted(VOCABS.glob("ggml-vocab-*.gguf"))
    if not paths:
        raise SystemExit(f"no fixtures in {VOCABS}: run `make data` first")
    return paths


def measure(paths: list[Path], repeat: int) -> Census:
    """Both census programs `repeat` times over `paths`, each repetition's pair checked to agree."""
    exe = compile_c()
    meta = machine(repeat)
    c_cmd = [str(exe), *map(str, paths)]
    py_cmd = [sys.executable, "-m", "llgbridge.measure.census_worker", *map(str, paths)]
    py_runs: list[CensusRun] = []
    c_runs: list[CensusRun] = []
    for i in tqdm(range(repeat), desc="census python vs C"):
        # alternate the order so drift in the machine's load hits both sides alike
        for side in ("c", "py") if i % 2 == 0 else ("py", "c"):
            if side == "c":
                c_runs.append(run_child(c_cmd))
            else:
                py_runs.append(run_child(py_cmd))
        check_agree(py_runs[-1], c_runs[-1])
    return Census(paths, py_runs, c_runs, check_seconds(paths, repeat), meta)


CHECKS_LABEL = "(of which Python's checks before the load: read_kv + check_tokenizer, timed apart)"


def _parts_rows(py: list[CensusRun], c: list[CensusRun], checks: float) -> list[list[str]]:
    """The parts table's rows: each part's medians, Python's checks under the load, the wall last."""
    pp, cp = median_parts(py), median_parts(c)
    rows = []
    for key, label in PARTS:
        ratio = f"{pp[key] / cp[key]:.2f}" if cp[key] > 0.0005 else ""
        rows.append([label, f"{pp[key]:.3f}", f"{cp[key]:.3f}", f"{pp[key] - cp[key]:+.3f}", ratio])
        if key == "load":
            rows.append([CHECKS_LABEL, f"{checks:.3f}", "", "", ""])
    return rows


def census_context(ref: dict[str, Line], py: list[CensusRun], c: list[CensusRun], checks: float) -> dict[str, Any]:
    """The census section's figures and tables, for templates/bench.md.j2."""
    py_per, py_wall, py_cpu = median_run(py)
    c_per, c_wall, c_cpu = median_run(c)
    py_sum, c_sum = sum(py_per.values()), sum(c_per.values())
    total_tokens = sum(x.n_tokens for x in ref.values())
    ratio = py_wall / c_wall
    # repetition i's Python run against its C run (they ran back to back): the spread of the ratio
    ratios = sorted(p.wall / q.wall for p, q in zip(py, c))
    vocabs: list[list[object]] = [
        [n, x.n_tokens, x.differing, x.lost, f"{py_per[n]:.3f}", f"{c_per[n]:.3f}", f"{py_per[n] / c_per[n]:.2f}"]
        for n, x in ref.items()
    ]
    vocabs.append(["**all**", total_tokens, "", "", f"{py_sum:.3f}", f"{c_sum:.3f}", f"{py_sum / c_sum:.2f}"])
    parts = _parts_rows(py, c, checks)
    parts.append(["**process wall**", f"{py_wall:.3f}", f"{c_wall:.3f}", f"{py_wall - c_wall:+.3f}", f"{ratio:.2f}"])
    return {
        "goal": GOAL,
        "met": ratio <= GOAL,
        "ratio": f"{ratio:.2f}",
        "py_wall": f"{py_wall:.2f}",
        "c_wall": f"{c_wall:.2f}",
        "ratio_min": f"{ratios[0]:.2f}",
        "ratio_max": f"{ratios[-1]:.2f}",
        "n_runs": len(ratios),
        "py_sum": f"{py_sum:.2f}",
        "c_sum": f"{c_sum:.2f}",
        "sum_ratio": f"{py_sum / c_sum:.2f}",
        "py_cpu": f"{py_cpu:.2f}",
        "c_cpu": f"{c_cpu:.2f}",
        "cpu_ratio": f"{py_cpu / c_cpu:.2f}",
        "parts": table(["part", "Python s", "C s", "Python - C s", "Python/C"], parts),
        "vocabs": table(["vocab", "n_tokens", "differing", "lost space", "Python s", "C s", "Python/C"], vocabs),
    }


def census_rows(
    ref: dict[str, Line], py: list[CensusRun], c: list[CensusRun], checks: float
) -> list[dict[str, object]]:
    """The census's rows of bench.csv."""
    py_per, py_wall, py_cpu = median_run(py)
    c_per, c_wall, c_cpu = median_run(c)
    total_tokens = sum(x.n_tokens for x in ref.values())
    rows: list[dict[str, object]] = []
    for n, line in ref.items():
        rows.append(csv_row("census", n, line.n_tokens, "c", c_per[n]))
        rows.append(csv_row("census", n, line.n_tokens, "python", py_per[n], py_per[n] / c_per[n]))
    py_sum, c_sum = sum(py_per.values()), sum(c_per.values())
    rows.append(csv_row("census", "ALL", total_tokens, "c", c_sum))
    rows.append(csv_row("census", "ALL", total_tokens, "python", py_sum, py_sum / c_sum))
    for bench, p, q in (("census_process_wall", py_wall, c_wall), ("census_process_cpu", py_cpu, c_cpu)):
        rows.append(csv_row(bench, "ALL", total_tokens, "c", q))
        rows.append(csv_row(bench, "ALL", total_tokens, "python", p, p / q))
    pp, cp = median_parts(py), median_parts(c)
    for key, _ in PARTS:
        rows.append(csv_row("census_part", "ALL", total_tokens, f"c: {key}", cp[key]))
        rows.append(
            csv_row(
                "census_part",
                "ALL",
                total_tokens,
                f"python: {key}",
                pp[key],
                pp[key] / cp[key] if cp[key] > 0 else None,
            )
        )
    rows.append(csv_row("census_part", "ALL", total_tokens, "python: load checks", checks))
    return rows
