"""ctypes binding to llguidance's C API, as exported by the `llguidance` wheel.

The wheel's extension module (`llguidance/_lib.abi3.so`) exports the functions declared in
upstream `parser/llguidance.h`, so this module drives the very Rust code that llama.cpp links
when built with `-DLLAMA_LLGUIDANCE=ON`. Struct layouts follow that header field for field
(`LlgTokenizerInit` is the v1 struct that `common/llguidance.cpp` fills).

But:
- only the functions the bridge and the analyses need are declared;
- `log_stderr_level` is set to 0, so llguidance's warnings do not clutter notebooks; every
  error is still read back with `llg_matcher_get_error` and reported verbatim.
"""

from __future__ import annotations

import ctypes
import importlib.util
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
from pathlib import Path

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
        "llg_clone_tokenizer": (c_void_p, [c_void_p]),
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
        "llg_matcher_compute_ff_tokens": (c_int32, [c_void_p, POINTER(c_uint32), c_size_t]),
        "llg_matcher_reset": (c_int32, [c_void_p]),
    }
    for name, (restype, argtypes) in sig.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


lib = _load()
