"""What each optimisation of the census bought, and the bridges' tokenizer builds, in this
process over the census's fixtures (`make bench`'s parts after the census against C)."""

from __future__ import annotations

import ctypes
import functools
import statistics
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import llama_cpp
from tqdm import tqdm

from .. import _llamacall, bridges
from ..analyses.census.compute import (
    classify,
    detokenize_mechanisms,
    loaded_meta,
    observed_add_space_prefix,
    run_census,
)
from ..gguf_meta import read_meta
from ..vocab import MAX_PIECE, Vocab
from .benchmd import BenchPart, csv_row, table
from .census_c import Census

TIMED_BRIDGES = ("upstream", "fixed")  # the two the PR changes between; sentinel is not timed


def per_token(v: Vocab) -> None:
    lstrip, clean = detokenize_mechanisms(v)
    read_meta(v.path), observed_add_space_prefix(v)
    for t in range(v.n_tokens):
        piece, detok = v.token_to_piece(t, 0, False), v.detokenize([t], False, False)
        if piece != detok:
            classify(piece, v.token_to_piece(t, 1, False), detok, lstrip, clean)


def _python_pass(v: Vocab) -> list[tuple[bytes, bytes, bytes]]:
    """The pass `Vocab.piece_detok_differences` made in Python before it was compiled: two calls
    per token through the binding into reused buffers, one comparison, a third call per difference."""
    tp, dt, vp = _llamacall.token_to_piece, _llamacall.detokenize, v.llama_vocab
    piece, detok, lstripped = bytearray(MAX_PIECE), bytearray(MAX_PIECE), bytearray(MAX_PIECE)
    one, out = array("i", [0]), []
    for t in range(v.n_tokens):
        n = tp(vp, t, piece, MAX_PIECE, 0, False)
        one[0] = t
        m = dt(vp, one, 1, detok, MAX_PIECE, False, False)
        if n != m or piece != detok:
            k = tp(vp, t, lstripped, MAX_PIECE, 1, False)
            out.append((bytes(piece[:n]), bytes(detok[:m]), bytes(lstripped[:k])))
            detok[:] = piece
    return out


def python_pass(v: Vocab) -> None:
    lstrip, clean = detokenize_mechanisms(v)
    read_meta(v.path), observed_add_space_prefix(v)
    for piece, detok, lstripped in _python_pass(v):
        classify(piece, lstripped, detok, lstrip, clean)


def one_pass(v: Vocab) -> None:
    lstrip, clean = detokenize_mechanisms(v)
    read_meta(v.path), observed_add_space_prefix(v)
    for _t, piece, detok, lstripped in v.piece_detok_differences():
        classify(piece, lstripped, detok, lstrip, clean)


# the compute's floor, split by how a call reaches llama.cpp: one llama_token_to_piece per token


def via_bindings(v: Vocab) -> None:
    buf, f = ctypes.create_string_buffer(MAX_PIECE), llama_cpp.llama_token_to_piece
    for t in range(v.n_tokens):
        f(v.llama_vocab, t, buf, MAX_PIECE, 0, False)


def raw_token_to_piece() -> Any:
    """llama_token_to_piece through a new handle on llama-cpp-python's library, no argtypes (the
    bindings' own handle stays as it is)."""
    raw = ctypes.PyDLL(llama_cpp.llama_cpp._lib._name)["llama_token_to_piece"]
    raw.restype = ctypes.c_int32
    return raw


def via_ctypes(raw: Any, v: Vocab) -> None:
    # argtype-less, the GIL kept, every pointer a byref made once: the census's way before the binding
    vp, buf = ctypes.byref(ctypes.c_char.from_address(v.llama_vocab)), bytearray(MAX_PIECE)
    buf_c = ctypes.byref((ctypes.c_char * MAX_PIECE).from_buffer(buf))
    for t in range(v.n_tokens):
        raw(vp, t, buf_c, MAX_PIECE, 0, 0)


def via_binding(v: Vocab) -> None:
    buf, f = bytearray(MAX_PIECE), _llamacall.token_to_piece
    for t in range(v.n_tokens):
        f(v.llama_vocab, t, buf, MAX_PIECE, 0, False)


def read_meta_walk(v: Vocab) -> None:
    read_meta(v.path)


def optimisation_stages() -> list[tuple[str, Callable[[Vocab], object]]]:
    """The census's optimisation stages, first to last, then the metadata and the compute's floor alone."""
    return [
        ("per-token Vocab methods + read_meta walk", per_token),
        ("one pass in Python, through the binding + read_meta walk", python_pass),
        ("one compiled pass (piece_detok_differences) + read_meta walk", one_pass),
        ("+ metadata from the loaded model (loaded_meta): run_census", run_census),
        ("(metadata only: read_meta walk)", read_meta_walk),
        ("(metadata only: loaded_meta)", loaded_meta),
        ("(one token_to_piece per token: llama-cpp-python's bindings)", via_bindings),
        (
            "(one token_to_piece per token: ctypes, no argtypes, byref pointers)",
            functools.partial(via_ctypes, raw_token_to_piece()),
        ),
        ("(one token_to_piece per token: llgbridge._llamacall)", via_binding),
    ]


def ablation(paths: list[Path]) -> list[tuple[str, float]]:
    """Each optimisation stage of the census, once over all vocabs, vocab load excluded.

    The earlier stages are rebuilt here from the public API, so the table measures what each
    change bought on this machine today rather than quoting old numbers.
    """
    vocabs = [Vocab(p) for p in paths]
    out = []
    for label, fn in tqdm(optimisation_stages(), desc="ablation", leave=False):
        t0 = time.perf_counter()
        for v in vocabs:
            fn(v)
        out.append((label, time.perf_counter() - t0))
    return out


@dataclass(frozen=True)
class Ablation(BenchPart):
    """Each stage's seconds, against the C loop's non-load seconds over the same vocabs."""

    stages: list[tuple[str, float]]
    c_work: float
    total_tokens: int

    def rows(self) -> list[dict[str, object]]:
        n = self.total_tokens
        return [
            csv_row("census_no_load", "ALL", n, "c", self.c_work),
            *(csv_row("census_no_load", "ALL", n, label, s, s / self.c_work) for label, s in self.stages),
        ]

    def context(self) -> dict[str, Any]:
        c_work = self.c_work
        rows = [
            ["C loop (bench/census.c)", f"{c_work:.2f}", "1.00"],
            *[[label, f"{s:.2f}", f"{s / c_work:.2f}"] for label, s in self.stages],
        ]
        return {"ablation": {"c_work": f"{c_work:.2f}", "table": table(["stage", "seconds", "vs C loop"], rows)}}


def measure_ablation(census: Census) -> Ablation:
    return Ablation(ablation(census.paths), census.c_work, census.total_tokens)


def bridge_builds(paths: list[Path], repeat: int) -> dict[tuple[str, str], float]:
    out = {}
    for p in tqdm(paths, desc="bridge builds", leave=False):
        v = Vocab(p)
        for bridge_name in TIMED_BRIDGES:
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                bridges.make_bridge(v, bridge_name)
                times.append(time.perf_counter() - t0)
            out[v.name, bridge_name] = statistics.median(times)
    return out


@dataclass(frozen=True)
class Builds(BenchPart):
    """`bridges.make_bridge`'s median seconds per (vocab, bridge); `n_tokens` each vocab's size."""

    seconds: dict[tuple[str, str], float]
    n_tokens: dict[str, int]

    def rows(self) -> list[dict[str, object]]:
        return [csv_row("bridge_build", n, self.n_tokens[n], b, s) for (n, b), s in self.seconds.items()]

    def context(self) -> dict[str, Any]:
        b = self.seconds
        columns = ["vocab", "n_tokens", *(f"{v} s" for v in TIMED_BRIDGES), *(f"{v} us/token" for v in TIMED_BRIDGES)]
        rows = [
            [
                n,
                size,
                *(f"{b[n, v]:.3f}" for v in TIMED_BRIDGES),
                *(f"{1e6 * b[n, v] / size:.2f}" for v in TIMED_BRIDGES),
            ]
            for n, size in sorted(self.n_tokens.items(), key=lambda kv: kv[1])
        ]
        return {"builds": table(columns, rows)}


def measure_builds(census: Census, repeat: int) -> Builds:
    return Builds(bridge_builds(census.paths, repeat), {n: x.n_tokens for n, x in census.ref.items()})
