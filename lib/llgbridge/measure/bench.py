"""Benchmark the Python census against the same loop in C, and time the bridge builds.

    python -m llgbridge.measure.bench [--out reports] [--repeat 3]
    python -m llgbridge.measure.bench --only census [--repeat 5]   # just Python vs C, printed, nothing written

`bench/census.c` is compiled with `cc` against the libllama that llama-cpp-python installed (so
both sides run the same native code) into `data/bench/`. Each repetition then runs, as two
child processes over all the fixtures, the C loop and `run_census` (`census_worker`), in
alternating order so that a noisy machine slows both alike; per-vocab seconds (load + census +
free, timed inside each process) and the processes' wall and CPU seconds are medians over the
repetitions, and so is each part of a process's wall (start, load, compute, free, write and
exit; both programs print a `ready` line after their start-up). Both sides must agree on every
vocab's differing and lost-leading-space counts, or nothing is written. Then, in this process: the optimisation
ablation (each census stage once over all vocabs), `bridges.build` per vocab and variant, the mask
in generation on synthetic models, and the real decode step: on each real model (`models`), per
bridge, llama.cpp's forward pass and the mask per token, and tokens per second with and without
the grammar, all from the same runs. Last, the report's regeneration: the real `make report`,
serial and -j2, from empty results, on today's content and on everything (`regen`), with its
overhead split from the analyses' own compute. Writes `reports/bench.csv` (tidy rows) and
`reports/bench.md` (through `templates/bench.md.j2`, its tables the report's `Table`s).
"""

from __future__ import annotations

import argparse
import csv
import ctypes
import functools
import importlib.metadata
import io
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import llama_cpp
import pandas as pd
from tqdm import tqdm

from .. import _llamacall, bridges, catalogue, corpus, generate, models, native, nb, params, synth
from ..analyses.census.compute import (
    classify,
    detokenize_mechanisms,
    loaded_meta,
    observed_add_space_prefix,
    run_census,
)
from ..cbuild import llama_dirs
from ..errors import InputError
from ..gguf_meta import check_tokenizer, read_kv, read_meta
from ..native import result as R
from ..native import trace as T
from ..native.logs import program_env
from ..paths import DATA, REPORTS, RESULTS, ROOT, VOCABS, vocab_path, write_atomic, write_json
from ..report import Table
from ..report.data import CORPUS_TIMING_JSON
from ..vocab import MAX_PIECE, Vocab
from . import loadtest, maskpath, quotes, regen
from .census_worker import now
from .maskpath import GRAMMAR
from .regen import GOALS
from .server_split import SERVER_PARTS, SERVER_SPLIT_MODELS, server_split
from .whatif_time import verdict as whatif_verdict
from .whatif_time import whatif_time

SOURCE = ROOT / "bench" / "census.c"
BUILD = DATA / "bench"
TIMED_BRIDGES = ("upstream", "fixed")  # the two the PR changes between; sentinel is not timed
GOAL = 1.5  # the target for python/C over all fixtures


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


def ablation(paths: list[Path]) -> list[tuple[str, float]]:
    """Each optimisation stage of the census, once over all vocabs, vocab load excluded.

    The earlier stages are rebuilt here from the public API, so the table measures what each
    change bought on this machine today rather than quoting old numbers.
    """

    def per_token(v: Vocab) -> None:
        lstrip, clean = detokenize_mechanisms(v)
        read_meta(v.path), observed_add_space_prefix(v)
        for t in range(v.n_tokens):
            piece, detok = v.token_to_piece(t, 0, False), v.detokenize([t], False, False)
            if piece != detok:
                classify(piece, v.token_to_piece(t, 1, False), detok, lstrip, clean)

    def one_pass(v: Vocab) -> None:
        lstrip, clean = detokenize_mechanisms(v)
        read_meta(v.path), observed_add_space_prefix(v)
        for _t, piece, detok, lstripped in v.piece_detok_differences():
            classify(piece, lstripped, detok, lstrip, clean)

    # the compute's floor, split by how a call reaches llama.cpp: one llama_token_to_piece per token
    raw = ctypes.PyDLL(llama_cpp.llama_cpp._lib._name)["llama_token_to_piece"]  # a new handle: the bindings' stays
    raw.restype = ctypes.c_int32

    def via_bindings(v: Vocab) -> None:
        buf, f = ctypes.create_string_buffer(MAX_PIECE), llama_cpp.llama_token_to_piece
        for t in range(v.n_tokens):
            f(v.llama_vocab, t, buf, MAX_PIECE, 0, False)

    def via_ctypes(v: Vocab) -> None:
        # argtype-less, the GIL kept, every pointer a byref made once: the census's way before the binding
        vp, buf = ctypes.byref(ctypes.c_char.from_address(v.llama_vocab)), bytearray(MAX_PIECE)
        buf_c = ctypes.byref((ctypes.c_char * MAX_PIECE).from_buffer(buf))
        for t in range(v.n_tokens):
            raw(vp, t, buf_c, MAX_PIECE, 0, 0)

    def via_binding(v: Vocab) -> None:
        buf, f = bytearray(MAX_PIECE), _llamacall.token_to_piece
        for t in range(v.n_tokens):
            f(v.llama_vocab, t, buf, MAX_PIECE, 0, False)

    stages: list[tuple[str, Callable[[Vocab], object]]] = [
        ("per-token Vocab methods + read_meta walk", per_token),
        ("one pass (piece_detok_differences, iter_pieces) + read_meta walk", one_pass),
        ("+ metadata from the loaded model (loaded_meta): run_census", run_census),
        ("(metadata only: read_meta walk)", lambda v: read_meta(v.path)),
        ("(metadata only: loaded_meta)", loaded_meta),
        ("(one token_to_piece per token: llama-cpp-python's bindings)", via_bindings),
        ("(one token_to_piece per token: ctypes, no argtypes, byref pointers)", via_ctypes),
        ("(one token_to_piece per token: llgbridge._llamacall)", via_binding),
    ]
    vocabs = [Vocab(p) for p in paths]
    out = []
    for label, fn in tqdm(stages, desc="ablation", leave=False):
        t0 = time.perf_counter()
        for v in vocabs:
            fn(v)
        out.append((label, time.perf_counter() - t0))
    return out


def bridge_builds(paths: list[Path], repeat: int) -> dict[tuple[str, str], float]:
    out = {}
    for p in tqdm(paths, desc="bridge builds", leave=False):
        v = Vocab(p)
        for bridge_name in TIMED_BRIDGES:
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                bridges.build(v, bridge_name)
                times.append(time.perf_counter() - t0)
            out[v.name, bridge_name] = statistics.median(times)
    return out


def versions() -> dict[str, str]:
    cc = subprocess.run(["cc", "--version"], capture_output=True, text=True).stdout.splitlines()
    out = {"python": platform.python_version(), "cc": cc[0] if cc else "?"}
    for dist in ("llama_cpp_python", "llguidance"):
        out[dist] = importlib.metadata.version(dist)
    return out


def median_run(runs: list[CensusRun]) -> tuple[dict[str, float], float, float]:
    names = runs[0].lines
    per = {n: statistics.median(r.lines[n].seconds for r in runs) for n in names}
    return per, statistics.median(r.wall for r in runs), statistics.median(r.cpu for r in runs)


def median_parts(runs: list[CensusRun]) -> dict[str, float]:
    """Each part's median over the runs (so the medians need not add up to the median wall)."""
    return {k: statistics.median(r.parts()[k] for r in runs) for k, _ in PARTS}


def _frame(columns: list[str], rows: Sequence[Sequence[object]]) -> Any:
    return pd.DataFrame([[str(x) for x in r] for r in rows], columns=columns)


def _table(columns: list[str], rows: Sequence[Sequence[object]]) -> Any:
    return Table(_frame(columns, rows))


def census_context(ref: dict[str, Line], py: list[CensusRun], c: list[CensusRun], checks: float) -> dict[str, Any]:
    """The census section's figures and tables, for templates/bench.md.j2."""
    py_per, py_wall, py_cpu = median_run(py)
    c_per, c_wall, c_cpu = median_run(c)
    py_sum, c_sum = sum(py_per.values()), sum(c_per.values())
    total_tokens = sum(x.n_tokens for x in ref.values())
    ratio = py_wall / c_wall
    # repetition i's Python run against its C run (they ran back to back): the spread of the ratio
    ratios = sorted(p.wall / q.wall for p, q in zip(py, c))
    vocabs = [
        [n, x.n_tokens, x.differing, x.lost, f"{py_per[n]:.3f}", f"{c_per[n]:.3f}", f"{py_per[n] / c_per[n]:.2f}"]
        for n, x in ref.items()
    ]
    vocabs.append(["**all**", total_tokens, "", "", f"{py_sum:.3f}", f"{c_sum:.3f}", f"{py_sum / c_sum:.2f}"])
    pp, cp = median_parts(py), median_parts(c)
    parts = []
    for key, label in PARTS:
        parts.append(
            [
                label,
                f"{pp[key]:.3f}",
                f"{cp[key]:.3f}",
                f"{pp[key] - cp[key]:+.3f}",
                f"{pp[key] / cp[key]:.2f}" if cp[key] > 0.0005 else "",
            ]
        )
        if key == "load":
            parts.append(
                [
                    "(of which Python's checks before the load: read_kv + check_tokenizer, timed apart)",
                    f"{checks:.3f}",
                    "",
                    "",
                    "",
                ]
            )
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
        "parts": _table(["part", "Python s", "C s", "Python - C s", "Python/C"], parts),
        "vocabs": _table(["vocab", "n_tokens", "differing", "lost space", "Python s", "C s", "Python/C"], vocabs),
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
        rows.append(_row("census", n, line.n_tokens, "c", c_per[n]))
        rows.append(_row("census", n, line.n_tokens, "python", py_per[n], py_per[n] / c_per[n]))
    py_sum, c_sum = sum(py_per.values()), sum(c_per.values())
    rows.append(_row("census", "ALL", total_tokens, "c", c_sum))
    rows.append(_row("census", "ALL", total_tokens, "python", py_sum, py_sum / c_sum))
    for bench, p, q in (("census_process_wall", py_wall, c_wall), ("census_process_cpu", py_cpu, c_cpu)):
        rows.append(_row(bench, "ALL", total_tokens, "c", q))
        rows.append(_row(bench, "ALL", total_tokens, "python", p, p / q))
    pp, cp = median_parts(py), median_parts(c)
    for key, _ in PARTS:
        rows.append(_row("census_part", "ALL", total_tokens, f"c: {key}", cp[key]))
        rows.append(
            _row(
                "census_part",
                "ALL",
                total_tokens,
                f"python: {key}",
                pp[key],
                pp[key] / cp[key] if cp[key] > 0 else None,
            )
        )
    rows.append(_row("census_part", "ALL", total_tokens, "python: load checks", checks))
    return rows


def _row(bench: str, vocab: str, n: int, variant: str, s: float, ratio: float | None = None) -> dict[str, object]:
    return {
        "benchmark": bench,
        "vocab": vocab,
        "n_tokens": n,
        "variant": variant,
        "seconds": round(s, 6),
        "ratio": "" if ratio is None else round(ratio, 3),
        "us_per_token": round(1e6 * s / max(n, 1), 4),
    }


def render(context: dict[str, Any]) -> str:
    """templates/bench.md.j2 with `context`; a section whose key is None is left out."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("llgbridge", "templates"),
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    sections = (
        "census",
        "ablation",
        "builds",
        "mask_path",
        "generation",
        "decode",
        "server_load",
        "corpus_time",
        "native_split",
        "server_split",
        "whatif",
        "regen",
    )
    # every section ends in a blank line; the page does not
    return env.get_template("bench.md.j2").render({k: None for k in sections} | context).rstrip("\n") + "\n"


def meta_context(meta: dict[str, str]) -> dict[str, str]:
    return {
        **meta,
        "versions": ", ".join(
            f"{k} {v}" for k, v in meta.items() if k not in ("machine", "nproc", "loadavg", "repeat")
        ),
    }


def write_reports(
    out: Path,
    ref: dict[str, Line],
    py: list[CensusRun],
    c: list[CensusRun],
    checks: float,
    stages: list[tuple[str, float]],
    builds: dict[tuple[str, str], float],
    meta: dict[str, str],
    paths: list[dict[str, Any]],
    real: list[dict[str, Any]],
    mask: list[dict[str, Any]],
    regens: dict[str, Any] | None = None,
    load: loadtest.LoadRun | None = None,
    corpus_time: dict[str, Any] | None = None,
    native_parts: list[dict[str, Any]] | None = None,
    server_parts: list[dict[str, Any]] | None = None,
    whatif_runs: list[dict[str, Any]] | None = None,
) -> None:
    total_tokens = sum(x.n_tokens for x in ref.values())
    rows = census_rows(ref, py, c, checks)

    def row(bench: str, vocab: str, n: int, variant: str, s: float, ratio: float | None = None) -> None:
        rows.append(_row(bench, vocab, n, variant, s, ratio))

    c_work = statistics.median(sum(x.seconds - x.load for x in r.lines.values()) for r in c)
    row("census_no_load", "ALL", total_tokens, "c", c_work)
    for label, s in stages:
        row("census_no_load", "ALL", total_tokens, label, s, s / c_work)
    for (n, variant), s in builds.items():
        row("bridge_build", n, ref[n].n_tokens, variant, s)
    for r in paths:
        for part in ("compute", "apply_old", "apply", "llama_apply"):
            for q in ("p50", "p99"):
                row("mask_path", r["vocab"], r["n_vocab"], f"{part}_{q}", r[f"{part}_{q}_us"] / 1e6)
        row("mask_path", r["vocab"], r["n_vocab"], "port_p50", r["port_p50_us"] / 1e6, r["ratio_to_llama"])
        if r["forward_ms_per_token"] != "":
            row("mask_path", r["vocab"], r["n_vocab"], "forward_per_token", r["forward_ms_per_token"] / 1000)
            for q in ("p50", "p99"):
                row("mask_path", r["vocab"], r["n_vocab"], f"forward_{q}", r[f"forward_{q}_ms"] / 1000)
    for r in real:
        row("decode_forward_ms", r["vocab"], r["n_vocab"], r["bridge"], r["forward_ms"] / 1000)
        row("decode_mask_ms", r["vocab"], r["n_vocab"], r["bridge"], r["mask_ms"] / 1000, r["mask_share"])
        row(
            "decode_tok_s",
            r["vocab"],
            r["n_vocab"],
            r["bridge"],
            r["constrained_tok_s"],
            r["constrained_tok_s"] / r["unconstrained_tok_s"] if r["unconstrained_tok_s"] else None,
        )
    regens = regens or {"regens": [], "identity": {}}
    for r in regens["regens"]:
        tag = "serial" if r.jobs == 1 else f"j{r.jobs}"
        row("report_regeneration", r.content, len(r.runs), tag, r.wall)
        row("report_regeneration", r.content, len(r.runs), f"{tag}_analysis", r.analysis)
        row("report_regeneration", r.content, len(r.runs), f"{tag}_overhead", r.overhead, r.share)
        for part, secs in r.parts().items():
            row("report_regeneration_part", r.content, len(r.runs), f"{tag}: {part}", secs)
        if r.jobs == 1:
            for x in r.by_analysis():
                row("report_regeneration_analysis", x["analysis"], x["runs"], r.content, x["compute"], x["share"])
    for (content, j), (n, differ) in regens["identity"].items():
        row("report_regeneration_identity", content, n, f"serial_vs_j{j}_differing", len(differ))
    for m in mask:
        row("mask_per_token", m["vocab"], m["n_vocab"], m["bridge"], m["mask_s"])
        row(
            "generation_tok_s",
            m["vocab"],
            m["n_vocab"],
            m["bridge"],
            m["constrained_tok_s"],
            m["constrained_tok_s"] / m["unconstrained_tok_s"],
        )

    for r in server_parts or []:
        row("server_part", r["model"], r["requests_n"], "wall", r["wall"])
        for k, _ in SERVER_PARTS:
            row("server_part", r["model"], r["requests_n"], k, r[k], r[k] / r["wall"])
    for r in whatif_runs or []:
        row("whatif", r["vocab"], r["analyses"], r["run"], r["wall"])
    for r in native_parts or []:
        row("native_part", r["vocab"], r["n_tokens"], "wall", r["wall"])
        for k, _ in [*NATIVE_PARTS, NATIVE_BEFORE]:
            row("native_part", r["vocab"], r["n_tokens"], k, r[k], r[k] / r["wall"])

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    write_atomic(out / "bench.csv", buf.getvalue())

    by_size = sorted(ref.items(), key=lambda kv: kv[1].n_tokens)
    context: dict[str, Any] = {
        "meta": meta_context(meta),
        "census": census_context(ref, py, c, checks),
        "ablation": {
            "c_work": f"{c_work:.2f}",
            "table": _table(
                ["stage", "seconds", "vs C loop"],
                [
                    ["C loop (bench/census.c)", f"{c_work:.2f}", "1.00"],
                    *[[label, f"{s:.2f}", f"{s / c_work:.2f}"] for label, s in stages],
                ],
            ),
        },
        "builds": _table(
            ["vocab", "n_tokens", *(f"{v} s" for v in TIMED_BRIDGES), *(f"{v} us/token" for v in TIMED_BRIDGES)],
            [
                [
                    n,
                    line.n_tokens,
                    *(f"{builds[n, v]:.3f}" for v in TIMED_BRIDGES),
                    *(f"{1e6 * builds[n, v] / line.n_tokens:.2f}" for v in TIMED_BRIDGES),
                ]
                for n, line in by_size
            ],
        ),
        "mask_path": None
        if not paths
        else {
            "grammar": maskpath.GRAMMAR,
            "steps": maskpath.STEPS,
            "table": _table(
                [
                    "vocab",
                    "n_vocab",
                    "compute µs p50 / p99",
                    "apply, old, µs p50 / p99",
                    "apply µs p50 / p99",
                    "llama.cpp apply µs p50 / p99",
                    "ratio",
                    "forward ms p50 / p99",
                ],
                [
                    [
                        r["vocab"],
                        r["n_vocab"],
                        f"{r['compute_p50_us']} / {r['compute_p99_us']}",
                        f"{r['apply_old_p50_us']} / {r['apply_old_p99_us']}",
                        f"{r['apply_p50_us']} / {r['apply_p99_us']}",
                        f"{r['llama_apply_p50_us']} / {r['llama_apply_p99_us']}",
                        r["ratio_to_llama"],
                        f"{r['forward_p50_ms']} / {r['forward_p99_ms']}",
                    ]
                    for r in paths
                ],
            ),
        },
        "generation": None
        if not mask
        else {
            "grammar": maskpath.GRAMMAR,
            "tokens": GEN_TOKENS,
            "table": _table(
                ["vocab", "n_vocab", "bridge", "mask ms/token", "constrained tok/s", "unconstrained tok/s"],
                [
                    [
                        m["vocab"],
                        m["n_vocab"],
                        m["bridge"],
                        f"{1000 * m['mask_s']:.2f}",
                        f"{m['constrained_tok_s']:.0f}",
                        f"{m['unconstrained_tok_s']:.0f}",
                    ]
                    for m in mask
                ],
            ),
        },
        "decode": {
            "threads": DECODE_THREADS,
            "grammar": maskpath.GRAMMAR,
            "tokens": DECODE_TOKENS,
            "table": None
            if not real
            else _table(
                [
                    "model",
                    "n_vocab",
                    "prompt",
                    "bridge",
                    "tokens",
                    "forward ms/token",
                    "mask ms/token",
                    "step ms",
                    "mask share",
                    "tok/s",
                    "unconstrained tok/s",
                ],
                [
                    [
                        r["vocab"],
                        r["n_vocab"],
                        r["prompt"],
                        r["bridge"],
                        f"{r['n_tokens']:.0f}",
                        f"{r['forward_ms']:.1f}",
                        f"{r['mask_ms']:.2f}",
                        f"{r['step_ms']:.1f}",
                        f"{100 * r['mask_share']:.1f}%",
                        f"{r['constrained_tok_s']:.1f}",
                        f"{r['unconstrained_tok_s']:.1f}",
                    ]
                    for r in real
                ],
            ),
        },
        "regen": regen_context(regens, GOALS),
        "server_load": None
        if load is None
        else {
            "md": loadtest.SERVER_LOAD_MD,
            "rounds": load.rounds,
            "fixed_violations": sum(r["violations"] for r in load.rows if r["sampler"] == "fixed"),
            "disagrees": sum(r["judge_disagrees"] for r in load.rows),
            "builds": len(load.rows),
        },
        "corpus_time": corpus_mask_time_context(corpus_time),
        "native_split": {"table": native_split_table(native_parts)} if native_parts else None,
        "server_split": {"table": server_split_table(server_parts)} if server_parts else None,
        "whatif": whatif_context(whatif_runs),
    }
    if corpus_time:
        write_atomic(out / CORPUS_TIMING_JSON, json.dumps(corpus_time, indent=1, sort_keys=True) + "\n")
    if load is not None:
        loadtest.write(out, load)
    write_atomic(out / "bench.md", render(context))


def regen_context(regens: dict[str, Any], goals: dict[str, float]) -> dict[str, Any] | None:
    rs = regens["regens"]
    if not rs:
        return None
    return {
        "goals": {
            "serial": f"{goals['serial']:.0f}",
            "j2": f"{goals['j2']:.0f}",
            "overhead": f"{100 * goals['overhead_share']:.0f}",
        },
        "table": _table(
            ["content", "make", "runs", "wall s", "analysis s", "overhead s", "overhead share"],
            [
                [
                    r.content,
                    f"-j{r.jobs}",
                    len(r.runs),
                    f"{r.wall:.1f}",
                    f"{r.analysis:.1f}",
                    f"{r.overhead:.1f}",
                    f"{100 * r.share:.0f}%",
                ]
                for r in rs
            ],
        ),
        "identity": [
            {"content": content, "jobs": j, "n": n, "differ": ", ".join(differ[:10]), "n_differ": len(differ)}
            for (content, j), (n, differ) in regens["identity"].items()
        ],
        "parts": _table(
            ["part", *(f"{r.content} -j{r.jobs}" for r in rs)],
            [[name, *(f"{r.parts()[name]:.1f}" for r in rs)] for name in rs[0].parts()],
        ),
        "by_analysis": [
            {
                "content": r.content,
                "table": _table(
                    ["analysis", "runs", "wall s", "compute s", "overhead s", "overhead share"],
                    [
                        [
                            x["analysis"],
                            x["runs"],
                            f"{x['wall']:.1f}",
                            f"{x['compute']:.1f}",
                            f"{x['overhead']:.1f}",
                            f"{100 * x['share']:.0f}%",
                        ]
                        for x in r.by_analysis()
                    ],
                ),
            }
            for r in rs
            if r.jobs == 1
        ],
    }


NATIVE_SPLIT_VOCABS = ("bert-bge", "llama-bpe", "gemma3-270m")  # 31k, 128k and 262k tokens
# native.analyse's wall in parts (key, label); a compiled process's setup is estimated per
# (llguidance, sampler) from the harness run with no job (its start and vocab load) and with one
# position-0 job (adding the sampler's tokenizer build and one grammar), medians of three
NATIVE_PARTS = (
    ("harness_setup", "harness: process starts and vocab loads"),
    ("harness_tokenizer", "harness: tokenizer builds, one per sampler a process serves"),
    ("test_work", "llama.cpp's tests, in the harness's children (floor)"),
    ("harness_work", "harness: the walks, and reading them back (floor)"),
    ("test_own", "llama.cpp's tests in binaries of their own (where no harness serves them)"),
    ("special", "bug C's walks in harness runs of their own"),
    ("bridges", "the port's bridge builds"),
    ("port", "the port's walks (port_trace, differential)"),
    ("other", "the rest: jobs, causes, bug D rows"),
)
# beside them, in the same run: the same tests each in a binary of its own, as analyse ran them
# before the harness served them (issue 33), each process starting, loading and building anew
NATIVE_BEFORE = ("tests_own_binaries", "before: the same tests, each in a binary of its own")


def native_split(vocabs: tuple[str, ...] = NATIVE_SPLIT_VOCABS) -> list[dict[str, Any]]:
    """`native.analyse` on each vocab with the notebook's defaults, its wall split into
    NATIVE_PARTS (one row per vocab: `n_tokens`, `wall`, `processes`, each part's seconds, and
    NATIVE_BEFORE's); empty where the native parts are not built. Each call into the compiled
    programs and the port is timed where `analyse` makes it, its own seconds only (a harness run
    inside bug C's rows counts there, not as the differential's)."""
    if native.unavailable():
        return []
    p = params.declared("native")
    # (part, the samplers one compiled process served, llguidance, own seconds, its tests' seconds)
    calls: list[tuple[str, tuple[str, ...], str, float, float]] = []
    stack: list[list[Any]] = []

    def served(part: str, a: tuple[Any, ...]) -> tuple[str, ...]:
        if part == "test":
            return (str(a[1]),)
        if part == "harness":
            return (str(a[0]),)
        return tuple(a[0]) if part == "harness_serve" else ()

    def timed(part: str, f: Callable[..., Any]) -> Callable[..., Any]:
        def g(*a: Any, **k: Any) -> Any:
            under = stack[-1][0] if stack else ""
            stack.append([part, 0.0])
            t0 = time.perf_counter()
            got = None
            try:
                got = f(*a, **k)
                return got
            finally:
                dt = time.perf_counter() - t0
                inner = stack.pop()[1]
                if stack:
                    stack[-1][1] += dt
                tag = "special" if part == "harness" and under == "special" else part.removesuffix("_serve")
                tests = sum(got.test_seconds.values()) if isinstance(got, native.Served) else 0.0
                calls.append((tag, served(part, a), str(k.get("llg") or ""), dt - inner, tests))

        return g

    # each module's own name for what it calls: the result module's, and the trace module's for the
    # harness's own fallbacks (a run of its own for a sampler or a test it could not serve)
    wrapped = {
        (R, "harness_serve"): "harness_serve",
        (R, "special_literal_rows"): "special",
        (R, "differential"): "port",
        (R, "port_traces"): "port",
        (T, "harness"): "harness",
        (T, "run_test"): "test",
    }
    saved = {key: getattr(*key) for key in wrapped}
    out = []
    try:
        for (mod, name), part in wrapped.items():
            setattr(mod, name, timed(part, saved[mod, name]))
        build = timed("bridges", nb.bridge)
        for name in vocabs:
            v = nb.load_vocab(name)
            calls.clear()
            t0 = time.perf_counter()
            res = R.analyse(v, p["literal"], p["leak_grammar"], walks=p["walks"], seed=p["seed"], build=build)
            wall = time.perf_counter() - t0

            def probe(sampler: str, llg: str, jobs: str) -> float:
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

            leak = native.Job("leak", p["leak_grammar"], ()).line()
            setups = {
                (s, llg): (probe(s, llg, ""), probe(s, llg, leak))
                for part, samplers, llg, _, _ in calls
                if part in ("harness", "special")
                for s in samplers
            }
            parts = dict.fromkeys((k for k, _ in NATIVE_PARTS), 0.0)
            n_procs = 0
            for part, samplers, llg, secs, tests in calls:
                if part in ("test", "harness") or (part == "special" and samplers):
                    n_procs += 1
                if part == "harness":
                    # one start and vocab load per process, one tokenizer build per sampler it served
                    empty = setups[samplers[0], llg][0]
                    tokenizers = sum(setups[s, llg][1] - setups[s, llg][0] for s in samplers)
                    parts["harness_setup"] += empty
                    parts["harness_tokenizer"] += tokenizers
                    parts["test_work"] += tests
                    parts["harness_work"] += secs - empty - tokenizers - tests
                elif part == "test":
                    parts["test_own"] += secs
                elif part in ("special", "bridges", "port"):
                    parts[part] += secs
            parts["other"] = wall - sum(parts.values())
            t1 = time.perf_counter()
            for t in res.tests:
                native.run_test(t.test, t.sampler, v.path, llg=t.llguidance or None, overrides=v.overrides)
            before = time.perf_counter() - t1
            out.append(
                {
                    "vocab": name,
                    "n_tokens": v.n_tokens,
                    "wall": wall,
                    "processes": n_procs,
                    **parts,
                    NATIVE_BEFORE[0]: before,
                    "tests": len(res.tests),
                }
            )
    finally:
        for (mod, name), f in saved.items():
            setattr(mod, name, f)
    return out


def native_split_table(rows: list[dict[str, Any]]) -> Any:
    """NATIVE_PARTS down, the vocabs across: seconds and share of each vocab's wall; last, the
    tests as they ran before, each in a binary of its own, against what they cost now."""
    return _table(
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


def server_split_table(rows: list[dict[str, Any]]) -> Any:
    """SERVER_PARTS down, the models across: seconds and share of each model's wall."""
    return _table(
        ["part", *(r["model"] for r in rows)],
        [
            [
                "wall s (server starts, requests)",
                *(f"{r['wall']:.1f} ({r['starts']}, {r['requests_n']})" for r in rows),
            ],
            *[[label, *(f"{r[k]:.2f} ({100 * r[k] / r['wall']:.0f}%)" for r in rows)] for k, label in SERVER_PARTS],
        ],
    )


def whatif_context(rows: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    """The what-if's section: each run's wall, and the goal against the plain one."""
    if not rows:
        return None
    return {
        "vocab": rows[0]["vocab"],
        "verdict": whatif_verdict(rows),
        "table": _table(
            ["what-if", "analyses run", "failed", "wall s (median)", "each run, in order"],
            [
                [
                    r["run"],
                    r["analyses"],
                    r["failed"],
                    f"{r['wall']:.1f}",
                    ", ".join(f"{w:.1f}" for w in r["walls"]),
                ]
                for r in rows
            ],
        ),
    }


MASK_PATH_VOCABS = ("llama-spm", "llama-bpe", "gemma-4")  # 32k, 128k and 262k tokens


def mask_path_timing(vocabs: tuple[str, ...] = MASK_PATH_VOCABS) -> list[dict[str, Any]]:
    """`maskpath.measure` per vocab; empty (and said once) where the native parts are not built."""
    why = native.unavailable()
    if why:
        print(f"mask path: skipped ({why})", file=sys.stderr)
        return []
    return [maskpath.measure(n).row() for n in tqdm(vocabs, desc="mask path", file=sys.stderr)]


GEN_VOCABS = ("llama-spm", "phi-3", "baichuan", "llama-bpe", "qwen35", "gemma-4")
# the grammar is maskpath.GRAMMAR: open-ended, so every step computes a real mask
GEN_TOKENS = 48


def generation_timing(vocabs: tuple[str, ...] = GEN_VOCABS, repeat: int = 5) -> list[dict[str, Any]]:
    """Per (synthetic model, bridge): mask ms per token and decode tokens/s, vs unconstrained.

    Medians over `repeat` runs of the per-token interval after the first token (which pays for
    the prompt), in this process, one run at a time: the matrix's own timings share the
    machine with parallel notebooks and are too noisy to quote. The runs are interleaved
    (unconstrained, upstream, fixed, unconstrained, ...), so a slow second of the machine falls on
    every bridge alike: run bridge after bridge, one snapshot had the fixed bridge's mask at 2.0x
    upstream's on baichuan where every run alone since gave 0.9-1.1x, and the PR comment quoted it.
    """
    out = []
    for name in tqdm(vocabs, desc="generation", file=sys.stderr):
        path = synth.ensure_model(name)
        llm, v = generate.load_model(path), Vocab(path, name)
        generate.generate(llm, v, None, max_tokens=8)  # warm-up
        makers: dict[str, Callable[[], Any]] = {
            "": lambda: None,
            **{b: functools.partial(bridges.build(v, b).new_matcher, GRAMMAR) for b in TIMED_BRIDGES},
        }
        rates: dict[str, list[float]] = {k: [] for k in makers}
        masks: dict[str, list[float]] = {k: [] for k in makers}
        for _ in range(repeat):
            for k, make_matcher in makers.items():
                g = generate.generate(llm, v, make_matcher(), max_tokens=GEN_TOKENS)
                gaps = [b - a for a, b in zip(g.token_times[1:], g.token_times[2:])]
                rates[k].append(1 / statistics.median(gaps) if gaps else 0.0)
                masks[k].append(g.mask_seconds / g.n_masks if g.n_masks else 0.0)
        for bridge_name in TIMED_BRIDGES:
            out.append(
                {
                    "vocab": name,
                    "n_vocab": v.n_tokens,
                    "bridge": bridge_name,
                    "mask_s": statistics.median(masks[bridge_name]),
                    "constrained_tok_s": statistics.median(rates[bridge_name]),
                    "unconstrained_tok_s": statistics.median(rates[""]),
                }
            )
    return out


# the real decode step: an open grammar (maskpath.GRAMMAR), so every step computes a real mask, and a prompt
# that asks for a long answer (an instruct model through its chat template, a pretrained one as text)
DECODE_ASK = "Describe the sea in forty lowercase words, with no punctuation."
DECODE_COMPLETION = "a description of the sea in lowercase words with no punctuation: "
DECODE_TOKENS = 48
# one thread: on two cores shared with other work, two threads spin in OpenMP's barrier and a step
# takes several times as long (measured here: SmolLM2 at 6 tok/s with two threads, 52 with one)
DECODE_THREADS = 1


def real_decode_timing(repeat: int = 3, n_threads: int = DECODE_THREADS) -> list[dict[str, Any]]:
    """Per (real model, bridge): ms per token of the forward pass (llama.cpp's own perf counters
    on its one-token decodes) and of computing and applying the mask, the mask's share of the
    step (mask / (forward + mask + the rest: sampling, the matcher's consume, Python)), and
    constrained vs unconstrained tokens per second, each from the same runs; medians over
    `repeat`. A model that is not fetched is left out (with a line on stderr)."""
    out = []
    for name, m in tqdm(catalogue.REAL_MODELS.items(), desc="real decode step", file=sys.stderr):
        try:
            path = models.model_path(name)
        except InputError as e:
            print(f"bench: real decode step skipped: {e}", file=sys.stderr)
            continue
        llm, v = generate.load_model(path, n_threads=n_threads, overrides=m.overrides), Vocab(path, name, m.overrides)
        case = generate.Case(
            "decode", GRAMMAR, lambda s: True, "", instruction=DECODE_ASK, completion=DECODE_COMPLETION
        )
        prompt = generate.case_prompt(llm, case, m.instruct)
        generate.generate(llm, v, None, prompt, max_tokens=8)  # warm-up

        def medians(make_matcher: Callable[[], Any]) -> dict[str, float]:
            runs = []
            for _ in range(repeat):
                g = generate.generate(llm, v, make_matcher(), prompt, max_tokens=DECODE_TOKENS)
                # the step: one token's arrival to the next, the first excluded (it pays for the
                # prompt); a mean, as the forward and mask figures are, so the share adds up
                t = g.token_times
                step = (t[-1] - t[0]) / (len(t) - 1) if len(t) >= 2 else 0.0
                runs.append(
                    {
                        "forward_ms": 1000 * g.forward_seconds / max(g.n_forward, 1),
                        "mask_ms": 1000 * g.mask_seconds / g.n_masks if g.n_masks else 0.0,
                        "step_ms": 1000 * step,
                        "tok_s": 1 / step if step else 0.0,
                        "n_tokens": len(g.tokens),
                    }
                )
            return {k: statistics.median(r[k] for r in runs) for k in runs[0]}

        free = medians(lambda: None)
        out.append(
            {
                "vocab": name,
                "model": path.name,
                "n_vocab": v.n_tokens,
                "bridge": "none",
                "prompt": prompt.kind,
                **free,
                "mask_share": 0.0,
                "constrained_tok_s": free["tok_s"],
                "unconstrained_tok_s": free["tok_s"],
            }
        )
        for bridge_name in TIMED_BRIDGES:
            b = bridges.build(v, bridge_name)
            c = medians(lambda: b.new_matcher(GRAMMAR))
            out.append(
                {
                    "vocab": name,
                    "model": path.name,
                    "n_vocab": v.n_tokens,
                    "bridge": bridge_name,
                    "prompt": prompt.kind,
                    **c,
                    "mask_share": c["mask_ms"] / c["step_ms"] if c["step_ms"] else 0.0,
                    "constrained_tok_s": c["tok_s"],
                    "unconstrained_tok_s": free["tok_s"],
                }
            )
    return out


def corpus_mask_time(vocabs: list[str]) -> dict[str, Any] | None:
    """The report's corpus sample (the corpus notebook's schemas, seed and bridges) on `vocabs`,
    walked afresh (no job cache) and timed: `llg_matcher_compute_mask` per step, as
    `corpus.timing_rows` and `corpus.histograms`. Here and not in the report, like every timing:
    the report's corpus section draws its figure from this snapshot. No vocab: None."""
    if not vocabs:
        return None
    p = params.declared("corpus")
    ids = corpus.sample_ids(p["schemas"], p["seed"])
    run = corpus.run(
        [(v, corpus.repo_path(vocab_path(v))) for v in vocabs],
        ids,
        list(p["bridges"]),
        corpus.Params(seed=p["seed"]),
        cache_dir=None,
    )
    return {
        "schemas": len(ids),
        "seed": p["seed"],
        "hist_edges_us": corpus.HIST_EDGES,
        "hist": corpus.histograms(run),
        "timing": corpus.timing_rows(run),
    }


def corpus_mask_time_context(snap: dict[str, Any] | None) -> dict[str, Any] | None:
    if not snap:
        return None
    rows = snap["timing"]
    return {
        "schemas": snap["schemas"],
        "table": _table(list(rows[0]), [["" if v is None else v for v in r.values()] for r in rows]),
    }


def main(argv: list[str] | None = None) -> int:
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
        choices=["census", "native", "server", "whatif"],
        help=(
            "run only this part and print its section of bench.md; writes nothing (census: Python vs C; native, "
            "server: that analysis in parts; whatif: make whatif end to end)"
        ),
    )
    args = ap.parse_args(argv)
    splits: dict[str, tuple[Callable[[tuple[str, ...]], list[dict[str, Any]]], tuple[str, ...], Callable[..., Any]]] = {
        "native": (native_split, NATIVE_SPLIT_VOCABS, native_split_table),
        "server": (server_split, SERVER_SPLIT_MODELS, server_split_table),
    }
    if args.only == "whatif":
        print(render({"whatif": whatif_context(whatif_time())}), end="")
        return 0
    if args.only in splits:
        split, default, table = splits[args.only]
        rows = split(tuple(args.vocabs.split(",")) if args.vocabs else default)
        print(render({f"{args.only}_split": {"table": table(rows)} if rows else None}), end="")
        return 0
    paths = sorted(VOCABS.glob("ggml-vocab-*.gguf"))
    if args.vocabs:
        paths = [vocab_path(n) for n in args.vocabs.split(",")]
    if not paths:
        raise SystemExit(f"no fixtures in {VOCABS}: run `make data` first")
    exe = compile_c()
    meta = {
        "machine": f"{platform.platform()} {platform.machine()}",
        "nproc": str(os.cpu_count()),
        "loadavg": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "repeat": str(args.repeat),
        **versions(),
    }
    c_cmd = [str(exe), *map(str, paths)]
    py_cmd = [sys.executable, "-m", "llgbridge.measure.census_worker", *map(str, paths)]
    py_runs: list[CensusRun] = []
    c_runs: list[CensusRun] = []
    for i in tqdm(range(args.repeat), desc="census python vs C"):
        # alternate the order so drift in the machine's load hits both sides alike
        for side in ("c", "py") if i % 2 == 0 else ("py", "c"):
            if side == "c":
                c_runs.append(run_child(c_cmd))
            else:
                py_runs.append(run_child(py_cmd))
        check_agree(py_runs[-1], c_runs[-1])
    checks = check_seconds(paths, args.repeat)
    if args.only == "census":
        print(
            render({"meta": meta_context(meta), "census": census_context(c_runs[0].lines, py_runs, c_runs, checks)}),
            end="",
        )
        return 0
    stages = ablation(paths)
    builds = bridge_builds(paths, args.repeat)
    regens = regen.measure(tuple(args.regen)) if args.regen else None
    load = loadtest.run()
    write_reports(
        args.out,
        c_runs[0].lines,
        py_runs,
        c_runs,
        checks,
        stages,
        builds,
        meta,
        mask_path_timing(),
        real_decode_timing(),
        generation_timing(),
        regens,
        load,
        corpus_mask_time(
            args.corpus_vocabs.split()
            if args.corpus_vocabs is not None
            else sorted(f.stem for f in (RESULTS / "corpus").glob("*.json"))
        ),
        native_split(),
        server_split(),
        whatif_time(),
    )
    # the guide's quotes on real weights: a real model's words depend on the CPU, so, like every
    # timing here, they are a dated snapshot the report quotes (`quotes`)
    snap = quotes.snapshot()
    if snap["inputs"]:
        write_json(args.out / quotes.SNAPSHOT, snap)
    print(
        f"wrote {args.out / 'bench.csv'} and {args.out / 'bench.md'}"
        + (f" and {quotes.SNAPSHOT}" if snap["inputs"] else "")
    )
    for line in load.failures:
        print(f"bench: load test: {line}", file=sys.stderr)
    return 1 if loadtest.failed(load) else 0


if __name__ == "__main__":
    raise SystemExit(main())
