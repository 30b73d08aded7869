"""ctypes binding to llguidance's C API, as exported by the `llguidance` wheel.

The wheel's extension module (`llguidance/_lib.abi3.so`) exports the functions declared in
upstream `parser/llguidance.h`, so this module drives the very Rust code that llama.cpp links
when built with `-DLLAMA_LLGUIDANCE=ON`. Struct layouts follow that header field for field
(`LlgTokenizerInit` is the v1 struct that `common/llguidance.cpp` fills).

`Matcher` drives one `LlgMatcher` as llama.cpp's sampler does; `mask_bits` turns the mask
words it returns into one bool per token; `apply_mask` applies them to logits in place (the
generation's decode loop; `maskpath` times it).

But:
- only the functions the bridge and the analyses need are declared;
- `log_stderr_level` is set to 0 (unless `LLGUIDANCE_LOG_LEVEL` says otherwise), so
  llguidance's warnings do not clutter notebooks; every error is still read back with
  `llg_matcher_get_error` and reported verbatim.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_bool,
    c_char,
    c_char_p,
    c_int32,
    c_size_t,
    c_uint8,
    c_uint32,
    c_uint64,
    c_void_p,
)
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import InputError, LlgError, first_line

# size_t (*)(const void *user_data, const uint8_t *bytes, size_t bytes_len,
#            uint32_t *output_tokens, size_t output_tokens_len)
LlgTokenizeFn = CFUNCTYPE(c_size_t, c_void_p, POINTER(c_uint8), c_size_t, POINTER(c_uint32), c_size_t)


class LlgTokenizerInit(Structure):
    _fields_ = [
        ("vocab_size", c_uint32),
        ("tok_eos", c_uint32),
        ("token_lens", POINTER(c_uint32)),
        ("token_bytes", POINTER(c_uint8)),
        ("tokenizer_json", c_char_p),
        ("tokenize_assumes_string", c_bool),
        ("tokenize_fn", LlgTokenizeFn),
        ("use_approximate_greedy_tokenize_fn", c_bool),
        ("tokenize_user_data", c_void_p),
        ("slices", POINTER(c_char_p)),
    ]


class LlgParserLimits(Structure):
    _fields_ = [
        ("max_items_in_row", c_size_t),
        ("initial_lexer_fuel", c_uint64),
        ("step_lexer_fuel", c_uint64),
        ("step_max_items", c_size_t),
        ("max_lexer_states", c_size_t),
        ("max_grammar_size", c_size_t),
        ("precompute_large_lexemes", c_bool),
        ("verbose_errors", c_bool),
    ]


class LlgConstraintInit(Structure):
    _fields_ = [
        ("tokenizer", c_void_p),
        ("log_buffer_level", c_uint32),
        ("log_stderr_level", c_uint32),
        ("ff_tokens_ok", c_bool),
        ("backtrack_ok", c_bool),
        ("limits", LlgParserLimits),
    ]


def _library_path() -> Path:
    spec = importlib.util.find_spec("llguidance")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the llguidance package is not installed (make setup installs it)")
    pkg = Path(next(iter(spec.submodule_search_locations)))
    found = sorted(pkg.glob("_lib*.so")) + sorted(pkg.glob("_lib*.pyd")) + sorted(pkg.glob("_lib*.dylib"))
    if not found:
        raise ImportError(f"no llguidance extension module in {pkg}")
    return found[0]


def _load() -> ctypes.CDLL:
    lib = ctypes.CDLL(str(_library_path()))
    sig = {
        "llg_new_tokenizer": (c_void_p, [POINTER(LlgTokenizerInit), POINTER(c_char), c_size_t]),
        "llg_free_tokenizer": (None, [c_void_p]),
        "llg_tokenize_bytes": (c_size_t, [c_void_p, POINTER(c_uint8), c_size_t, POINTER(c_uint32), c_size_t]),
        "llg_constraint_init_set_defaults": (None, [POINTER(LlgConstraintInit), c_void_p]),
        "llg_new_matcher": (c_void_p, [POINTER(LlgConstraintInit), c_char_p, c_char_p]),
        "llg_free_matcher": (None, [c_void_p]),
        "llg_matcher_get_error": (c_char_p, [c_void_p]),
        "llg_matcher_is_error": (c_bool, [c_void_p]),
        "llg_matcher_compute_mask": (c_int32, [c_void_p]),
        "llg_matcher_get_mask": (POINTER(c_uint32), [c_void_p]),
        "llg_matcher_get_mask_byte_size": (c_size_t, [c_void_p]),
        "llg_matcher_consume_token": (c_int32, [c_void_p, c_uint32]),
        "llg_matcher_is_stopped": (c_bool, [c_void_p]),
        "llg_matcher_is_accepting": (c_bool, [c_void_p]),
    }
    for name, (restype, argtypes) in sig.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


lib = _load()


def mask_bits(words: np.ndarray, n_tokens: int) -> np.ndarray:
    """One bool per token id from llguidance's 32-bit mask words (bit t of word t // 32)."""
    return np.unpackbits(words.view(np.uint8), bitorder="little")[:n_tokens].astype(bool)


def apply_mask(logits: np.ndarray, words: np.ndarray) -> np.ndarray:
    """Set the logits of tokens the mask does not allow to -inf, in place; returns `logits`.

    `words` are llguidance's 32-bit mask words (bit `t % 32` of word `t // 32` allows token
    `t`). Where few tokens are allowed (the usual case under a grammar) it is cheaper to keep
    them and overwrite everything else than to index the disallowed ones.
    """
    n = logits.shape[-1]
    bits = np.unpackbits(words.view(np.uint8), count=n, bitorder="little").view(bool)
    allowed = np.flatnonzero(bits)
    if len(allowed) * 2 < n:
        keep = logits[allowed]
        logits.fill(-np.inf)
        logits[allowed] = keep
    else:
        logits[~bits] = -np.inf
    return logits


@dataclass
class Timing:
    """How long llguidance took for one owner's matchers, per call in call order (ns): the C
    call alone, not the copy of the mask or the Python around it."""

    owner: object
    compile_ns: list[int] = field(default_factory=list)
    mask_ns: list[int] = field(default_factory=list)


_TIMING: ContextVar[Timing | None] = ContextVar("llg_timing", default=None)


@contextmanager
def timed(owner: object) -> Iterator[Timing]:
    """Record the compile and mask times of the matchers `owner` (a bridge) makes, while active:
    the corpus's timing figure, taken inside the walks `soundness.walk` runs without a wrapper."""
    t = Timing(owner)
    token = _TIMING.set(t)
    try:
        yield t
    finally:
        _TIMING.reset(token)


def _timing(owner: object) -> Timing | None:
    t = _TIMING.get()
    return t if t is not None and t.owner is owner else None


class Matcher:
    """An `LlgMatcher` as llama.cpp drives it (common/llguidance.cpp:17-68).

    `tokenizer` is an `LlgTokenizer *`; `owner` (the bridge that made it) is kept alive with
    the matcher, and with it the tokenize callback llguidance may call while computing a mask.
    """

    def __init__(self, tokenizer: int, n_tokens: int, grammar: str, kind: str = "lark", owner: object = None) -> None:
        self.owner = owner
        self.n_tokens = n_tokens
        self.grammar = grammar
        self.kind = kind
        init = LlgConstraintInit()
        lib.llg_constraint_init_set_defaults(ctypes.byref(init), tokenizer)
        level = os.environ.get("LLGUIDANCE_LOG_LEVEL")
        init.log_stderr_level = int(level) if level else 0
        t0 = time.perf_counter_ns()
        self._h = lib.llg_new_matcher(ctypes.byref(init), kind.encode(), grammar.encode())
        compile_ns = time.perf_counter_ns() - t0
        err = lib.llg_matcher_get_error(self._h)
        if err:
            lib.llg_free_matcher(self._h)
            self._h = None
            shown = first_line(grammar) or "(empty)"
            raise InputError(
                f"{kind} grammar {shown[:60]!r}",
                f"llguidance rejected it: {first_line(err.decode('utf-8', 'replace'))}",
            )
        self.n_words = lib.llg_matcher_get_mask_byte_size(self._h) // 4
        weakref.finalize(self, lib.llg_free_matcher, self._h)
        if (t := _timing(owner)) is not None:
            t.compile_ns.append(compile_ns)

    @property
    def error(self) -> str | None:
        err = lib.llg_matcher_get_error(self._h)
        return err.decode("utf-8", "replace") if err else None

    def mask(self) -> np.ndarray:
        """The 32-bit mask words of the next step (`llg_matcher_compute_mask`)."""
        t0 = time.perf_counter_ns()
        rc = lib.llg_matcher_compute_mask(self._h)
        if (t := _timing(self.owner)) is not None:
            t.mask_ns.append(time.perf_counter_ns() - t0)
        if rc != 0:
            raise LlgError(self.error or "compute_mask failed")
        ptr = lib.llg_matcher_get_mask(self._h)
        return np.ctypeslib.as_array(ptr, shape=(self.n_words,)).copy()

    def allowed(self) -> list[int]:
        """Token ids the mask allows, ascending."""
        return [int(t) for t in np.flatnonzero(mask_bits(self.mask(), self.n_tokens))]

    def consume(self, token: int) -> None:
        if lib.llg_matcher_consume_token(self._h, token) != 0:
            raise LlgError(self.error or "consume_token failed")

    @property
    def is_stopped(self) -> bool:
        return bool(lib.llg_matcher_is_stopped(self._h))

    @property
    def is_accepting(self) -> bool:
        return bool(lib.llg_matcher_is_accepting(self._h))
