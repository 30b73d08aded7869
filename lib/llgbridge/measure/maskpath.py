"""The mask on the decode path, split into its parts and set beside llama.cpp's own sampler.

A constrained decode step costs: llguidance computing the mask (`llg_matcher_compute_mask`),
applying it to the logits, and the model's forward pass. The suite's generation used to copy
the logits and call `llguidance.numpy.apply_token_bitmask_inplace`, whose numpy kernel expands
every 32-bit word into 32 int32s: most of the "mask cost" was that, not llguidance. `apply_mask`
is the replacement: the mask's bits unpacked once, and the logits changed in place.

`measure(vocab)` walks one grammar step by step along the same tokens through:
- the port: `llg_matcher_compute_mask` alone, then each way of applying it to a float32 logits
  buffer of the vocab's size (the old copy-and-apply, and `apply_mask`);
- the compiled sampler (`native.harness`): `llama_sampler_apply` over llama.cpp's candidate
  array, which computes the mask and sets the disallowed logits to -INFINITY, timed per step;
- the synthetic model's forward pass, each step, from llama.cpp's own perf counters.

Cost: a few seconds per vocab (about 50 steps, each timed `REPEAT` times).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import bridges, generation, synth
from ..analyses.native import compute as native
from ..llg import (
    apply_mask,  # the decode loop's (generation.py); timed here, and kept as maskpath.apply_mask
    lib,
)
from ..modelfile import ModelFile
from ..paths import vocab_path
from ..vocab import Vocab

GRAMMAR = "start: /[a-z]+( [a-z]+)*/"  # open-ended: every step computes a real mask with real choice
STEPS = 48
REPEAT = 5  # each step's apply is timed this many times on fresh logits; the median is kept


def _old_apply(logits: np.ndarray, words: np.ndarray) -> np.ndarray:
    """What generate.py did: a copy of the logits, then llguidance's numpy kernel."""
    from llguidance.numpy import apply_token_bitmask_inplace

    out = np.array(logits, dtype=np.float32)
    apply_token_bitmask_inplace(out, words.view(np.int32))
    return out


@dataclass
class MaskPath:
    vocab: str
    n_vocab: int
    steps: int
    compute_us: list[float]
    apply_old_us: list[float]
    apply_us: list[float]
    llama_apply_us: list[float]  # llama.cpp's llama_sampler_apply: compute and apply together
    forward_ms: list[float]  # each one-token decode of the synthetic model (empty: none for this vocab)

    def row(self) -> dict[str, Any]:
        def p(xs: list[float], q: float) -> float:
            return round(float(np.percentile(xs, q)), 1) if xs else float("nan")

        ours = [c + a for c, a in zip(self.compute_us, self.apply_us)]
        ratio = (
            statistics.median(ours) / statistics.median(self.llama_apply_us) if self.llama_apply_us else float("nan")
        )
        return {
            "vocab": self.vocab,
            "n_vocab": self.n_vocab,
            "steps": self.steps,
            "compute_p50_us": p(self.compute_us, 50),
            "compute_p99_us": p(self.compute_us, 99),
            "apply_old_p50_us": p(self.apply_old_us, 50),
            "apply_old_p99_us": p(self.apply_old_us, 99),
            "apply_p50_us": p(self.apply_us, 50),
            "apply_p99_us": p(self.apply_us, 99),
            "port_p50_us": p(ours, 50),
            "llama_apply_p50_us": p(self.llama_apply_us, 50),
            "llama_apply_p99_us": p(self.llama_apply_us, 99),
            "ratio_to_llama": round(ratio, 2),
            "forward_ms_per_token": round(statistics.fmean(self.forward_ms), 3) if self.forward_ms else "",
            "forward_p50_ms": round(float(np.percentile(self.forward_ms, 50)), 3) if self.forward_ms else "",
            "forward_p99_ms": round(float(np.percentile(self.forward_ms, 99)), 3) if self.forward_ms else "",
        }


def _forward_ms(name: str) -> list[float]:
    """ms of each one-token forward pass of the synthetic model, from llama.cpp's perf counters."""
    try:
        path = synth.ensure_model(name)
    except Exception:  # noqa: BLE001 - no synthetic model for this vocab: the row says so
        return []
    llm, v = generation.load_model(ModelFile.read(path)), Vocab(path, name)
    return generation.generate(llm, v, None, max_tokens=STEPS).forward_ms


def measure(name: str, steps: int = STEPS, grammar: str = GRAMMAR, forward: bool = True) -> MaskPath:
    """Time one walk of `grammar` on vocab `name` (a fixture) through the port and the compiled sampler."""
    v = Vocab(vocab_path(name), name)
    b = bridges.make_bridge(v, "fixed")
    job = native.Job("maskpath", grammar, None, steps)
    trace = native.harness("fixed", v.path, [job])["maskpath"]
    tokens = [t for t in trace.tokens if t >= 0]
    m = b.new_matcher(grammar)
    rng = np.random.default_rng(0)
    base = rng.standard_normal(v.n_tokens).astype(np.float32)
    compute, old, new = [], [], []
    handle = m._h  # the LlgMatcher *: timing the C call alone, not the Python around it
    n_words = m.n_words
    for tok in tokens:
        t0 = time.perf_counter()
        rc = lib.llg_matcher_compute_mask(handle)
        compute.append((time.perf_counter() - t0) * 1e6)
        if rc != 0:
            break
        words = np.ctypeslib.as_array(lib.llg_matcher_get_mask(handle), shape=(n_words,))
        a_old, a_new = [], []
        for _ in range(REPEAT):
            t0 = time.perf_counter()
            _old_apply(base, words)
            a_old.append((time.perf_counter() - t0) * 1e6)
            logits = base.copy()
            t0 = time.perf_counter()
            apply_mask(logits, words)
            a_new.append((time.perf_counter() - t0) * 1e6)
        old.append(statistics.median(a_old))
        new.append(statistics.median(a_new))
        m.consume(tok)
    llama = [ns / 1000 for ns in trace.apply_ns[: len(compute)]]
    return MaskPath(name, v.n_tokens, len(compute), compute, old, new, llama, _forward_ms(name) if forward else [])


__all__ = ["apply_mask", "measure", "MaskPath", "GRAMMAR"]
