"""The mask's cost per token (`make bench`): the mask path in parts against llama.cpp's own
sampler (`maskpath`), the mask in generation on synthetic models, and the real decode step on
each real model, per bridge: llama.cpp's forward pass and the mask per token, and tokens per
second with and without the grammar, all from the same runs."""

from __future__ import annotations

import functools
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from .. import bridges, cases, catalogue, generation, models, synth
from ..analyses.native import compute as native
from ..errors import InputError
from ..modelfile import ModelFile
from ..vocab import Vocab
from . import maskpath
from .ablation import TIMED_BRIDGES
from .benchmd import BenchPart, csv_row, table
from .maskpath import GRAMMAR

MASK_PATH_VOCABS = ("llama-spm", "llama-bpe", "gemma-4")  # 32k, 128k and 262k tokens


def mask_path_timing(vocabs: tuple[str, ...] = MASK_PATH_VOCABS) -> list[dict[str, Any]]:
    """`maskpath.measure` per vocab; empty (and said once) where the native parts are not built."""
    why = native.unavailable()
    if why:
        print(f"mask path: skipped ({why})", file=sys.stderr)
        return []
    return [maskpath.measure(n).row() for n in tqdm(vocabs, desc="mask path", file=sys.stderr)]


MASK_PATH_COLUMNS = [
    "vocab",
    "n_vocab",
    "compute µs p50 / p99",
    "apply, old, µs p50 / p99",
    "apply µs p50 / p99",
    "llama.cpp apply µs p50 / p99",
    "ratio",
    "forward ms p50 / p99",
]


def _mask_path_rows(r: dict[str, Any]) -> list[dict[str, object]]:
    """One vocab's rows of bench.csv: each part's p50 and p99, the port's p50 against llama.cpp's,
    and the forward pass where the synthetic model ran."""
    row = functools.partial(csv_row, "mask_path", r["vocab"], r["n_vocab"])
    out = [
        row(f"{part}_{q}", r[f"{part}_{q}_us"] / 1e6)
        for part in ("compute", "apply_old", "apply", "llama_apply")
        for q in ("p50", "p99")
    ]
    out.append(row("port_p50", r["port_p50_us"] / 1e6, r["ratio_to_llama"]))
    if r["forward_ms_per_token"] != "":
        out.append(row("forward_per_token", r["forward_ms_per_token"] / 1000))
        out += [row(f"forward_{q}", r[f"forward_{q}_ms"] / 1000) for q in ("p50", "p99")]
    return out


@dataclass(frozen=True)
class MaskPath(BenchPart):
    """`maskpath.Timing.row()` per vocab; none where the native parts are not built."""

    timings: list[dict[str, Any]]

    def rows(self) -> list[dict[str, object]]:
        return [x for r in self.timings for x in _mask_path_rows(r)]

    def context(self) -> dict[str, Any]:
        if not self.timings:
            return {"mask_path": None}
        rows = [
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
            for r in self.timings
        ]
        section = {"grammar": GRAMMAR, "steps": maskpath.STEPS, "table": table(MASK_PATH_COLUMNS, rows)}
        return {"mask_path": section}


GEN_VOCABS = ("llama-spm", "phi-3", "baichuan", "llama-bpe", "qwen35", "gemma-4")
# the grammar is maskpath.GRAMMAR: open-ended, so every step computes a real mask
GEN_TOKENS = 48


def _generation_runs(name: str, repeat: int) -> tuple[int, dict[str, list[float]], dict[str, list[float]]]:
    """The synthetic model `name`'s vocab size, and per bridge ("" unconstrained) each run's
    tokens per second and mask seconds per token, the runs interleaved."""
    path = synth.ensure_model(name)
    llm, v = generation.load_model(ModelFile.read(path)), Vocab(path, name)
    generation.generate(llm, v, None, max_tokens=8)  # warm-up
    makers: dict[str, Callable[[], Any]] = {
        "": lambda: None,
        **{b: functools.partial(bridges.make_bridge(v, b).new_matcher, GRAMMAR) for b in TIMED_BRIDGES},
    }
    rates: dict[str, list[float]] = {k: [] for k in makers}
    masks: dict[str, list[float]] = {k: [] for k in makers}
    for _ in range(repeat):
        for k, make_matcher in makers.items():
            g = generation.generate(llm, v, make_matcher(), max_tokens=GEN_TOKENS)
            gaps = [b - a for a, b in zip(g.token_times[1:], g.token_times[2:])]
            rates[k].append(1 / statistics.median(gaps) if gaps else 0.0)
            masks[k].append(g.mask_seconds / g.n_masks if g.n_masks else 0.0)
    return v.n_tokens, rates, masks


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
        n_vocab, rates, masks = _generation_runs(name, repeat)
        for bridge_name in TIMED_BRIDGES:
            out.append(
                {
                    "vocab": name,
                    "n_vocab": n_vocab,
                    "bridge": bridge_name,
                    "mask_s": statistics.median(masks[bridge_name]),
                    "constrained_tok_s": statistics.median(rates[bridge_name]),
                    "unconstrained_tok_s": statistics.median(rates[""]),
                }
            )
    return out


@dataclass(frozen=True)
class Generation(BenchPart):
    """`generation_timing`'s rows: per (synthetic model, bridge)."""

    timings: list[dict[str, Any]]

    def rows(self) -> list[dict[str, object]]:
        out = []
        for m in self.timings:
            out.append(csv_row("mask_per_token", m["vocab"], m["n_vocab"], m["bridge"], m["mask_s"]))
            ratio = m["constrained_tok_s"] / m["unconstrained_tok_s"]
            out.append(
                csv_row("generation_tok_s", m["vocab"], m["n_vocab"], m["bridge"], m["constrained_tok_s"], ratio)
            )
        return out

    def context(self) -> dict[str, Any]:
        if not self.timings:
            return {"generation": None}
        columns = ["vocab", "n_vocab", "bridge", "mask ms/token", "constrained tok/s", "unconstrained tok/s"]
        rows = [
            [
                m["vocab"],
                m["n_vocab"],
                m["bridge"],
                f"{1000 * m['mask_s']:.2f}",
                f"{m['constrained_tok_s']:.0f}",
                f"{m['unconstrained_tok_s']:.0f}",
            ]
            for m in self.timings
        ]
        return {"generation": {"grammar": GRAMMAR, "tokens": GEN_TOKENS, "table": table(columns, rows)}}


# the real decode step: an open grammar (maskpath.GRAMMAR), so every step computes a real mask, and a prompt
# that asks for a long answer (an instruct model through its chat template, a pretrained one as text)
DECODE_ASK = "Describe the sea in forty lowercase words, with no punctuation."
DECODE_COMPLETION = "a description of the sea in lowercase words with no punctuation: "
DECODE_TOKENS = 48
# one thread: on two cores shared with other work, two threads spin in OpenMP's barrier and a step
# takes several times as long (measured here: SmolLM2 at 6 tok/s with two threads, 52 with one)
DECODE_THREADS = 1


@dataclass(frozen=True)
class DecodeModel:
    """A real model loaded for the decode step, with its vocab and the prompt it is given."""

    path: Path
    llm: Any
    vocab: Vocab
    prompt: Any


def _decode_run(m: DecodeModel, matcher: Any) -> dict[str, float]:
    g = generation.generate(m.llm, m.vocab, matcher, m.prompt, max_tokens=DECODE_TOKENS)
    # the step: one token's arrival to the next, the first excluded (it pays for the
    # prompt); a mean, as the forward and mask figures are, so the share adds up
    t = g.token_times
    step = (t[-1] - t[0]) / (len(t) - 1) if len(t) >= 2 else 0.0
    return {
        "forward_ms": 1000 * g.forward_seconds / max(g.n_forward, 1),
        "mask_ms": 1000 * g.mask_seconds / g.n_masks if g.n_masks else 0.0,
        "step_ms": 1000 * step,
        "tok_s": 1 / step if step else 0.0,
        "n_tokens": len(g.tokens),
    }


def _decode_medians(m: DecodeModel, make_matcher: Callable[[], Any], repeat: int) -> dict[str, float]:
    runs = [_decode_run(m, make_matcher()) for _ in range(repeat)]
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def _decode_model(name: str, n_threads: int) -> DecodeModel | None:
    """The real model `name` loaded and warmed up, or None (with a line on stderr) where it is not fetched."""
    m = catalogue.REAL_MODELS[name]
    try:
        path = models.model_path(name)
    except InputError as e:
        print(f"bench: real decode step skipped: {e}", file=sys.stderr)
        return None
    llm, v = (
        generation.load_model(ModelFile.read(path), n_threads=n_threads, overrides=m.overrides),
        Vocab(path, name, m.overrides),
    )
    case = cases.Case("decode", GRAMMAR, lambda s: True, "", instruction=DECODE_ASK, completion=DECODE_COMPLETION)
    prompt = generation.case_prompt(generation.Chat.of_llm(llm), case, m.instruct)
    generation.generate(llm, v, None, prompt, max_tokens=8)  # warm-up
    return DecodeModel(path, llm, v, prompt)


def _decode_rows(name: str, m: DecodeModel, repeat: int) -> list[dict[str, Any]]:
    """The model unconstrained (bridge `none`), then each timed bridge against it."""
    head = {"vocab": name, "model": m.path.name, "n_vocab": m.vocab.n_tokens}
    free = _decode_medians(m, lambda: None, repeat)
    out = [
        {
            **head,
            "bridge": "none",
            "prompt": m.prompt.kind,
            **free,
            "mask_share": 0.0,
            "constrained_tok_s": free["tok_s"],
            "unconstrained_tok_s": free["tok_s"],
        }
    ]
    for bridge_name in TIMED_BRIDGES:
        make = functools.partial(bridges.make_bridge(m.vocab, bridge_name).new_matcher, GRAMMAR)
        c = _decode_medians(m, make, repeat)
        out.append(
            {
                **head,
                "bridge": bridge_name,
                "prompt": m.prompt.kind,
                **c,
                "mask_share": c["mask_ms"] / c["step_ms"] if c["step_ms"] else 0.0,
                "constrained_tok_s": c["tok_s"],
                "unconstrained_tok_s": free["tok_s"],
            }
        )
    return out


def real_decode_timing(repeat: int = 3, n_threads: int = DECODE_THREADS) -> list[dict[str, Any]]:
    """Per (real model, bridge): ms per token of the forward pass (llama.cpp's own perf counters
    on its one-token decodes) and of computing and applying the mask, the mask's share of the
    step (mask / (forward + mask + the rest: sampling, the matcher's consume, Python)), and
    constrained vs unconstrained tokens per second, each from the same runs; medians over
    `repeat`. A model that is not fetched is left out (with a line on stderr)."""
    out = []
    for name in tqdm(catalogue.REAL_MODELS, desc="real decode step", file=sys.stderr):
        m = _decode_model(name, n_threads)
        if m is not None:
            out += _decode_rows(name, m, repeat)
    return out


DECODE_COLUMNS = [
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
]


@dataclass(frozen=True)
class Decode(BenchPart):
    """`real_decode_timing`'s rows; the section stands (saying so) where no real model is fetched."""

    timings: list[dict[str, Any]]

    def rows(self) -> list[dict[str, object]]:
        out = []
        for r in self.timings:
            row = functools.partial(csv_row, vocab=r["vocab"], n=r["n_vocab"], variant=r["bridge"])
            out.append(row("decode_forward_ms", s=r["forward_ms"] / 1000))
            out.append(row("decode_mask_ms", s=r["mask_ms"] / 1000, ratio=r["mask_share"]))
            free = r["unconstrained_tok_s"]
            out.append(
                row("decode_tok_s", s=r["constrained_tok_s"], ratio=r["constrained_tok_s"] / free if free else None)
            )
        return out

    def context(self) -> dict[str, Any]:
        rows = [
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
            for r in self.timings
        ]
        section = {"threads": DECODE_THREADS, "grammar": GRAMMAR, "tokens": DECODE_TOKENS}
        return {"decode": section | {"table": table(DECODE_COLUMNS, rows) if rows else None}}
