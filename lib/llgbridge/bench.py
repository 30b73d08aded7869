"""Benchmark the Python census against the same loop in C, and time the bridge builds.

    python -m llgbridge.bench [--out reports] [--repeat 3]

`bench/census.c` is compiled with `cc` against the libllama that llama-cpp-python installed (so
both sides run the same native code) into `data/bench/`. Each repetition then runs, as two
child processes over all the fixtures, the C loop and `run_census` (this module's `--worker`
mode), in alternating order so that a noisy machine slows both alike; per-vocab seconds
(load + census + free, timed inside each process) and the processes' wall and CPU seconds are
medians over the repetitions. Both sides must agree on every vocab's differing and
lost-leading-space counts, or nothing is written. Then, in this process: the optimisation
ablation (each census stage once over all vocabs), `bridges.build` per vocab and variant, the mask
in generation on synthetic models, and the real decode step: on each real model (`models`), per
bridge, llama.cpp's forward pass and the mask per token, and tokens per second with and without
the grammar, all from the same runs. Last, the report's regeneration: the real `make report`,
serial and -j2, from empty results, on today's content and on everything (`regen`), with its
overhead split from the analyses' own compute. Writes `reports/bench.csv` (tidy rows) and
`reports/bench.md`.
"""

from __future__ import annotations

import argparse
import csv
import importlib.metadata
import io
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from . import maskpath
from .paths import DATA, REPORTS, ROOT, VOCABS, vocab_path, write_atomic

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
    seconds: float
    load: float  # the part of `seconds` spent in llama_model_load_from_file


@dataclass(frozen=True)
class Run:
    lines: dict[str, Line]
    wall: float
    cpu: float


def llama_dirs() -> tuple[Path, Path]:
    """(include dir with llama.h, lib dir with libllama.so) of the installed llama-cpp-python."""
    import llama_cpp  # deferred: the worker and the census import it through Vocab anyway

    lib = Path(llama_cpp.__file__).parent / "lib"
    dist = importlib.metadata.distribution("llama_cpp_python")
    headers = [Path(str(f.locate())) for f in dist.files or [] if f.name == "llama.h"]
    include = headers[0].parent if headers else Path(llama_cpp.__file__).parents[1] / "include"
    for need in (include / "llama.h", lib / "libllama.so"):
        if not need.exists():
            raise SystemExit(f"{need}: not installed by llama-cpp-python; reinstall it from source (make setup)")
    return include, lib


def compile_c() -> Path:
    include, lib = llama_dirs()
    BUILD.mkdir(parents=True, exist_ok=True)
    exe, tmp = BUILD / "census", BUILD / ".census.tmp"
    cmd = ["cc", "-O2", "-Wall", f"-I{include}", str(SOURCE), f"-L{lib}", f"-Wl,-rpath,{lib}", "-lllama", "-o", str(tmp)]
    subprocess.run(cmd, check=True)
    os.replace(tmp, exe)  # a failed compile leaves the previous binary, never half of one
    return exe


def parse(out: str) -> dict[str, Line]:
    lines = {}
    for row in out.splitlines():
        name, n, d, lost, s, load = row.split()
        lines[name] = Line(name, int(n), int(d), int(lost), float(s), float(load))
    return lines


def run_child(cmd: list[str]) -> Run:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Run(parse(p.stdout), wall, cpu)


def worker(paths: list[str]) -> None:
    """The Python side of the comparison: print the C program's line format per vocab."""
    from .census import run_census
    from .vocab import Vocab

    for p in paths:
        t0 = time.perf_counter()
        v = Vocab(p)
        load = time.perf_counter() - t0
        c = run_census(v)
        del v  # frees the llama model, as the C loop does inside its timing
        s = time.perf_counter() - t0
        print(f"{c.vocab} {c.n_tokens} {c.differing} {c.lost_leading_space} {s:.6f} {load:.6f}", flush=True)


def check_agree(py: Run, c: Run) -> None:
    bad = [
        f"{n}: python {py.lines.get(n)} vs C {c.lines[n]}"
        for n in c.lines
        if n not in py.lines or (py.lines[n].n_tokens, py.lines[n].differing, py.lines[n].lost)
        != (c.lines[n].n_tokens, c.lines[n].differing, c.lines[n].lost)
    ]
    if bad or py.lines.keys() != c.lines.keys():
        raise SystemExit("python and C census disagree:\n" + "\n".join(bad or [f"{sorted(py.lines)} vs {sorted(c.lines)}"]))


def ablation(paths: list[Path]) -> list[tuple[str, float]]:
    """Each optimisation stage of the census, once over all vocabs, vocab load excluded.

    The earlier stages are rebuilt here from the public API, so the table measures what each
    change bought on this machine today rather than quoting old numbers.
    """
    from .census import classify, detokenize_mechanisms, loaded_meta, observed_add_space_prefix, run_census
    from .gguf_meta import read_meta
    from .vocab import Vocab

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

    stages: list[tuple[str, Callable[[Vocab], object]]] = [
        ("per-token Vocab methods + read_meta walk", per_token),
        ("one raw-ctypes pass (piece_detok_differences, iter_pieces) + read_meta walk", one_pass),
        ("+ metadata from the loaded model (loaded_meta): run_census", run_census),
        ("(metadata only: read_meta walk)", lambda v: read_meta(v.path)),
        ("(metadata only: loaded_meta)", loaded_meta),
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
    from . import bridges
    from .vocab import Vocab

    out = {}
    for p in tqdm(paths, desc="bridge builds", leave=False):
        v = Vocab(p)
        for variant in TIMED_BRIDGES:
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                bridges.build(v, variant)
                times.append(time.perf_counter() - t0)
            out[v.name, variant] = statistics.median(times)
    return out


def versions() -> dict[str, str]:
    cc = subprocess.run(["cc", "--version"], capture_output=True, text=True).stdout.splitlines()
    out = {"python": platform.python_version(), "cc": cc[0] if cc else "?"}
    for dist in ("llama_cpp_python", "llguidance"):
        out[dist] = importlib.metadata.version(dist)
    return out


def median_run(runs: list[Run]) -> tuple[dict[str, float], float, float]:
    names = runs[0].lines
    per = {n: statistics.median(r.lines[n].seconds for r in runs) for n in names}
    return per, statistics.median(r.wall for r in runs), statistics.median(r.cpu for r in runs)


def write_reports(
    out: Path, ref: dict[str, Line], py: list[Run], c: list[Run], stages: list[tuple[str, float]],
    builds: dict[tuple[str, str], float], meta: dict[str, str], paths: list[dict[str, Any]],
    real: list[dict[str, Any]], mask: list[dict[str, Any]], regens: dict[str, Any] | None = None,
) -> None:
    py_per, py_wall, py_cpu = median_run(py)
    c_per, c_wall, c_cpu = median_run(c)
    total_tokens = sum(x.n_tokens for x in ref.values())
    rows: list[dict[str, object]] = []

    def row(bench: str, vocab: str, n: int, variant: str, s: float, ratio: float | None = None) -> None:
        rows.append({"benchmark": bench, "vocab": vocab, "n_tokens": n, "variant": variant, "seconds": round(s, 6),
                     "ratio": "" if ratio is None else round(ratio, 3), "us_per_token": round(1e6 * s / max(n, 1), 4)})

    for n, line in ref.items():
        row("census", n, line.n_tokens, "c", c_per[n])
        row("census", n, line.n_tokens, "python", py_per[n], py_per[n] / c_per[n])
    py_sum, c_sum = sum(py_per.values()), sum(c_per.values())
    row("census", "ALL", total_tokens, "c", c_sum)
    row("census", "ALL", total_tokens, "python", py_sum, py_sum / c_sum)
    for bench, p, q in (("census_process_wall", py_wall, c_wall), ("census_process_cpu", py_cpu, c_cpu)):
        row(bench, "ALL", total_tokens, "c", q)
        row(bench, "ALL", total_tokens, "python", p, p / q)
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
        row("decode_tok_s", r["vocab"], r["n_vocab"], r["bridge"], r["constrained_tok_s"],
            r["constrained_tok_s"] / r["unconstrained_tok_s"] if r["unconstrained_tok_s"] else None)
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
        row("generation_tok_s", m["vocab"], m["n_vocab"], m["bridge"], m["constrained_tok_s"], m["constrained_tok_s"] / m["unconstrained_tok_s"])

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    write_atomic(out / "bench.csv", buf.getvalue())

    ratio = py_wall / c_wall
    md = [
        "# Census: Python vs C",
        "",
        f"Machine: {meta['machine']}, nproc {meta['nproc']}, load average at start {meta['loadavg']}.",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in meta.items() if k not in ("machine", "nproc", "loadavg", "repeat")) + ".",
        f"Median of {meta['repeat']} repetitions; each vocab's seconds are load + census + free, timed inside its process.",
        "",
        f"**Overall (process wall, incl. interpreter start and imports): Python {py_wall:.2f} s, C {c_wall:.2f} s, "
        f"ratio {ratio:.2f}** (goal <= {GOAL}: {'met' if ratio <= GOAL else 'NOT met'}). "
        f"Sum of per-vocab seconds: Python {py_sum:.2f} s, C {c_sum:.2f} s, ratio {py_sum / c_sum:.2f}. "
        f"Process CPU: Python {py_cpu:.2f} s, C {c_cpu:.2f} s, ratio {py_cpu / c_cpu:.2f}.",
        "",
        "| vocab | n_tokens | differing | lost space | Python s | C s | Python/C |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for n, line in ref.items():
        md.append(f"| {n} | {line.n_tokens} | {line.differing} | {line.lost} | {py_per[n]:.3f} | {c_per[n]:.3f} | {py_per[n] / c_per[n]:.2f} |")
    md.append(f"| **all** | {total_tokens} | | | {py_sum:.3f} | {c_sum:.3f} | {py_sum / c_sum:.2f} |")
    md += [
        "",
        "## What each optimisation bought",
        "",
        "Each stage once over all vocabs in one process, vocab load excluded (the load is the same native call "
        f"on both sides); against the C loop's non-load seconds (loop + free), {c_work:.2f} s. Earlier stages are "
        "rebuilt from the public API, so the first row already has the cheaper `string_at` copy in "
        "`Vocab.token_to_piece`/`detokenize`.",
        "",
        "| stage | seconds | vs C loop |",
        "|---|---:|---:|",
        f"| C loop (bench/census.c) | {c_work:.2f} | 1.00 |",
        *[f"| {label} | {s:.2f} | {s / c_work:.2f} |" for label, s in stages],
        "",
        "## Building each bridge's tokenizer",
        "",
        "`bridges.build(vocab, variant)` on an already loaded vocab, median seconds.",
        "",
        "| vocab | n_tokens | " + " | ".join(f"{v} s" for v in TIMED_BRIDGES) + " | " + " | ".join(f"{v} us/token" for v in TIMED_BRIDGES) + " |",
        "|---|---:|" + "---:|" * (2 * len(TIMED_BRIDGES)),
    ]
    for n, line in sorted(ref.items(), key=lambda kv: kv[1].n_tokens):
        s = [builds[n, v] for v in TIMED_BRIDGES]
        md.append(f"| {n} | {line.n_tokens} | " + " | ".join(f"{x:.3f}" for x in s) + " | "
                  + " | ".join(f"{1e6 * x / line.n_tokens:.2f}" for x in s) + " |")
    if paths:
        md += [
            "",
            "## The mask path, in parts, against llama.cpp's own sampler",
            "",
            f"One walk of `{maskpath.GRAMMAR}` per vocab ({maskpath.STEPS} steps, the compiled fixed sampler choosing), "
            "timed per step: llguidance's `llg_matcher_compute_mask` alone; applying its mask to a float32 logits "
            "buffer, the old way (a copy, then `llguidance.numpy.apply_token_bitmask_inplace`, whose kernel expands each "
            "32-bit word into 32 int32s) and the new one (`maskpath.apply_mask`: bits unpacked once, logits changed in "
            "place); llama.cpp's `llama_sampler_apply` on the same steps through the compiled sampler (it computes "
            "and applies); and the synthetic model's forward pass (llama.cpp's perf counters). *ratio* is the port's "
            "compute + apply over llama.cpp's, at the median (goal: at most 1.2).",
            "",
            "| vocab | n_vocab | compute µs p50 / p99 | apply, old, µs p50 / p99 | apply µs p50 / p99 | llama.cpp apply µs p50 / p99 | ratio | forward ms p50 / p99 |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
            *[f"| {r['vocab']} | {r['n_vocab']} | {r['compute_p50_us']} / {r['compute_p99_us']} | {r['apply_old_p50_us']} / "
              f"{r['apply_old_p99_us']} | {r['apply_p50_us']} / {r['apply_p99_us']} | {r['llama_apply_p50_us']} / "
              f"{r['llama_apply_p99_us']} | {r['ratio_to_llama']} | {r['forward_p50_ms']} / {r['forward_p99_ms']} |" for r in paths],
        ]
    if mask:
        md += [
            "",
            "## The mask in generation (timed here, one run at a time)",
            "",
            "Computing and applying the mask per generated token, and constrained vs unconstrained tokens per "
            "second on the same synthetic model (random weights: the model itself costs almost nothing, so this "
            f"is close to the mask's whole cost). Grammar `{GEN_GRAMMAR}`, {GEN_TOKENS} tokens, medians of 3 runs.",
            "",
            "| vocab | n_vocab | bridge | mask ms/token | constrained tok/s | unconstrained tok/s |",
            "|---|---:|---|---:|---:|---:|",
            *[f"| {m['vocab']} | {m['n_vocab']} | {m['bridge']} | {1000 * m['mask_s']:.2f} | {m['constrained_tok_s']:.0f} | "
              f"{m['unconstrained_tok_s']:.0f} |" for m in mask],
        ]
    md += real_decode_md(real)
    md += regen_md(regens)
    write_atomic(out / "bench.md", "\n".join(md) + "\n")


def regen_md(regens: dict[str, Any]) -> list[str]:
    from .regen import GOALS

    rs = regens["regens"]
    if not rs:
        return []
    md = [
        "",
        "## Regenerating the report",
        "",
        "The real `make report`, from empty results, in a copy of the tree that shares the venv, the fixtures, the "
        "models and the native build (`llgbridge.regen`), one regeneration after the other in this run. *today*: "
        "the 19 fixtures, the six per-vocab analyses and the matrix on the six synthetic models (issue 15's "
        "yardstick); *full*: everything the report holds (with the native differential, the real models and the corpus "
        "sample). *analysis*: the seconds the kernels spent in the notebooks' cells, the vocab's load left out; "
        "*overhead*: wall x jobs - analysis, everything else (its parts below). Goals for *today*: serial at most "
        f"{GOALS['serial']:.0f} s, -j2 at most {GOALS['j2']:.0f} s, overhead at most {100 * GOALS['overhead_share']:.0f}% "
        "of the wall.",
        "",
        "| content | make | runs | wall s | analysis s | overhead s | overhead share |",
        "|---|---|---:|---:|---:|---:|---:|",
        *[f"| {r.content} | -j{r.jobs} | {len(r.runs)} | {r.wall:.1f} | {r.analysis:.1f} | {r.overhead:.1f} | "
          f"{100 * r.share:.0f}% |" for r in rs],
    ]
    for (content, j), (n, differ) in regens["identity"].items():
        md.append("")
        md.append(f"*{content}*, serial against -j{j}: {n} files of `reports/` compared (the executed `.ipynb`, which "
                  "carry their cells' timestamps, and the matrix's and the corpus's pages, which plot their own timings, left out): "
                  + ("all byte-identical." if not differ else f"{len(differ)} differ: " + ", ".join(differ[:10])))
    parts = list(rs)
    names = list(parts[0].parts())
    md += ["", "Where the overhead goes (seconds, summed over the runs; on -j2, core-seconds):", "",
           "| part | " + " | ".join(f"{r.content} -j{r.jobs}" for r in parts) + " |",
           "|---|" + "---:|" * len(parts)]
    for name in names:
        md.append(f"| {name} | " + " | ".join(f"{r.parts()[name]:.1f}" for r in parts) + " |")
    for r in rs:
        if r.jobs != 1:
            continue
        md += ["", f"Per analysis, *{r.content}*, serial (each run's wall, its cells less the load, the rest):", "",
               "| analysis | runs | wall s | compute s | overhead s | overhead share |", "|---|---:|---:|---:|---:|---:|",
               *[f"| {x['analysis']} | {x['runs']} | {x['wall']:.1f} | {x['compute']:.1f} | {x['overhead']:.1f} | "
                 f"{100 * x['share']:.0f}% |" for x in r.by_analysis()]]
    return md


MASK_PATH_VOCABS = ("llama-spm", "llama-bpe", "gemma-4")  # 32k, 128k and 262k tokens


def mask_path_timing(vocabs: tuple[str, ...] = MASK_PATH_VOCABS) -> list[dict[str, Any]]:
    """`maskpath.measure` per vocab; empty (and said once) where the native parts are not built."""
    from . import native

    why = native.unavailable()
    if why:
        print(f"mask path: skipped ({why})", file=sys.stderr)
        return []
    return [maskpath.measure(n).row() for n in tqdm(vocabs, desc="mask path", file=sys.stderr)]


GEN_VOCABS = ("llama-spm", "phi-3", "baichuan", "llama-bpe", "qwen35", "gemma-4")
GEN_GRAMMAR = maskpath.GRAMMAR  # open-ended, so every step computes a real mask
GEN_TOKENS = 48


def generation_timing(vocabs: tuple[str, ...] = GEN_VOCABS, repeat: int = 3) -> list[dict[str, Any]]:
    """Per (synthetic model, bridge): mask ms per token and decode tokens/s, vs unconstrained.

    Medians over `repeat` runs of the per-token interval after the first token (which pays for
    the prompt), in this process, one run at a time: the matrix's own timings share the
    machine with parallel notebooks and are too noisy to quote.
    """
    from . import bridges, generate, synth
    from .vocab import Vocab

    out = []
    for name in tqdm(vocabs, desc="generation", file=sys.stderr):
        path = synth.ensure_model(name)
        llm, v = generate.load_model(path), Vocab(path, name)
        generate.generate(llm, v, None, max_tokens=8)  # warm-up

        def median_rate(make_matcher: Callable[[], Any]) -> tuple[float, float]:
            rates, masks = [], []
            for _ in range(repeat):
                g = generate.generate(llm, v, make_matcher(), max_tokens=GEN_TOKENS)
                gaps = [b - a for a, b in zip(g.token_times[1:], g.token_times[2:])]
                rates.append(1 / statistics.median(gaps) if gaps else 0.0)
                masks.append(g.mask_seconds / g.n_masks if g.n_masks else 0.0)
            return statistics.median(rates), statistics.median(masks)

        free, _ = median_rate(lambda: None)
        for variant in TIMED_BRIDGES:
            b = bridges.build(v, variant)
            rate, mask = median_rate(lambda: b.new_matcher(GEN_GRAMMAR))
            out.append({"vocab": name, "n_vocab": v.n_tokens, "bridge": variant, "mask_s": mask,
                        "constrained_tok_s": rate, "unconstrained_tok_s": free})
    return out


# the real decode step: an open grammar (GEN_GRAMMAR), so every step computes a real mask, and a prompt
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
    from . import bridges, generate, models
    from .errors import InputError
    from .vocab import Vocab

    out = []
    for name, m in tqdm(models.REAL_MODELS.items(), desc="real decode step", file=sys.stderr):
        try:
            path = models.model_path(name)
        except InputError as e:
            print(f"bench: real decode step skipped: {e}", file=sys.stderr)
            continue
        llm, v = generate.load_model(path, n_threads=n_threads), Vocab(path, name)
        case = generate.Case("decode", GEN_GRAMMAR, lambda s: True, "", instruction=DECODE_ASK, completion=DECODE_COMPLETION)
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
                runs.append({"forward_ms": 1000 * g.forward_seconds / max(g.n_forward, 1),
                             "mask_ms": 1000 * g.mask_seconds / g.n_masks if g.n_masks else 0.0,
                             "step_ms": 1000 * step, "tok_s": 1 / step if step else 0.0, "n_tokens": len(g.tokens)})
            return {k: statistics.median(r[k] for r in runs) for k in runs[0]}

        free = medians(lambda: None)
        out.append({"vocab": name, "model": path.name, "n_vocab": v.n_tokens, "bridge": "none", "prompt": prompt.kind,
                    **free, "mask_share": 0.0, "constrained_tok_s": free["tok_s"], "unconstrained_tok_s": free["tok_s"]})
        for variant in TIMED_BRIDGES:
            b = bridges.build(v, variant)
            c = medians(lambda: b.new_matcher(GEN_GRAMMAR))
            out.append({"vocab": name, "model": path.name, "n_vocab": v.n_tokens, "bridge": variant, "prompt": prompt.kind, **c,
                        "mask_share": c["mask_ms"] / c["step_ms"] if c["step_ms"] else 0.0,
                        "constrained_tok_s": c["tok_s"], "unconstrained_tok_s": free["tok_s"]})
    return out


def real_decode_md(real: list[dict[str, Any]]) -> list[str]:
    if not real:
        return ["", "## The mask in a real decode step", "", "(no real model fetched: run `make models`)"]
    return [
        "",
        "## The mask in a real decode step",
        "",
        "On the real models (`make models`), loaded as the matrix loads them (no AMX or repack buffers), "
        f"{DECODE_THREADS} threads. Grammar `{GEN_GRAMMAR}`, up to {DECODE_TOKENS} tokens at temperature 0, "
        "each figure the median over 3 runs of that run's mean per token; every figure of a row comes from the same "
        "runs. *forward*: llama.cpp's own timing of its one-token decodes; *mask*: computing the mask and applying it "
        "to the logits; *step*: one token's arrival to the next (forward, mask, sampling, the matcher's consume, "
        "Python); *share*: mask / step. `none` is the same prompt unconstrained.",
        "",
        "| model | n_vocab | prompt | bridge | tokens | forward ms/token | mask ms/token | step ms | mask share | tok/s | unconstrained tok/s |",
        "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|",
        *[f"| {r['vocab']} | {r['n_vocab']} | {r['prompt']} | {r['bridge']} | {r['n_tokens']:.0f} | {r['forward_ms']:.1f} | "
          f"{r['mask_ms']:.2f} | {r['step_ms']:.1f} | {100 * r['mask_share']:.1f}% | {r['constrained_tok_s']:.1f} | "
          f"{r['unconstrained_tok_s']:.1f} |" for r in real],
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m llgbridge.bench", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPORTS, help="where bench.csv and bench.md go (default: reports)")
    ap.add_argument("--repeat", type=int, default=3, help="repetitions; medians are reported (default: 3)")
    ap.add_argument("--vocabs", help="comma-separated fixture names (default: all in data/vocabs)")
    ap.add_argument("--regen", nargs="*", default=["today", "full"], metavar="CONTENT", choices=["today", "full"],
                    help="the report regenerations to time, serial and -j2 (default: today full; none: --regen)")
    ap.add_argument("--worker", nargs="+", metavar="GGUF", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.worker)
        return 0

    paths = sorted(VOCABS.glob("ggml-vocab-*.gguf"))
    if args.vocabs:
        paths = [vocab_path(n) for n in args.vocabs.split(",")]
    if not paths:
        raise SystemExit(f"no fixtures in {VOCABS}: run `make data` first")
    exe = compile_c()
    meta = {"machine": f"{platform.platform()} {platform.machine()}", "nproc": str(os.cpu_count()),
            "loadavg": " ".join(f"{x:.2f}" for x in os.getloadavg()), "repeat": str(args.repeat), **versions()}
    c_cmd = [str(exe), *map(str, paths)]
    py_cmd = [sys.executable, "-m", "llgbridge.bench", "--worker", *map(str, paths)]
    py_runs: list[Run] = []
    c_runs: list[Run] = []
    for i in tqdm(range(args.repeat), desc="census python vs C"):
        # alternate the order so drift in the machine's load hits both sides alike
        for side in (("c", "py") if i % 2 == 0 else ("py", "c")):
            if side == "c":
                c_runs.append(run_child(c_cmd))
            else:
                py_runs.append(run_child(py_cmd))
        check_agree(py_runs[-1], c_runs[-1])
    stages = ablation(paths)
    builds = bridge_builds(paths, args.repeat)
    from . import regen

    regens = regen.measure(tuple(args.regen)) if args.regen else None
    write_reports(args.out, c_runs[0].lines, py_runs, c_runs, stages, builds, meta,
                  mask_path_timing(), real_decode_timing(), generation_timing(), regens)
    print(f"wrote {args.out / 'bench.csv'} and {args.out / 'bench.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
