"""llama.cpp's own GBNF grammar sampler (`src/llama-grammar.cpp`), through llama-cpp-python's
low-level binding of the same libllama the suite loads.

The mask is the sampler's: `llama_sampler_init_grammar(vocab, gbnf, "root")` applied
(`llama_sampler_apply`) to a candidates array holding every id, the ids whose logit stays finite
admitted, and `llama_sampler_accept` to advance. What the sampler reads as each token's text is
the vocab's piece cache, `llama_token_to_piece(t, 0, special=true)` (`token_to_piece_for_cache`):
control tokens with their text. `llama_grammar_apply_impl` takes an end-of-generation token apart
(admitted only where the grammar can end) and masks a token whose piece is empty or starts with a
NUL byte, so neither is in `table`: neither is ever read as text.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from . import Pattern

# llama_token_data as llama.h lays it out: id, logit, p
TOKEN_DATA = np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])


def piece(vocab: Any, token: int) -> bytes:
    """`llama_token_to_piece(vocab, token, buf, n, 0, special=true)`: the bytes of the piece cache
    (with a cache, the call copies the cached piece; a negative return is the size it needs)."""
    import llama_cpp

    buf = ctypes.create_string_buffer(64)
    n = llama_cpp.llama_token_to_piece(vocab, token, buf, len(buf), 0, True)
    if n < 0:
        buf = ctypes.create_string_buffer(-n)
        n = llama_cpp.llama_token_to_piece(vocab, token, buf, len(buf), 0, True)
    return buf.raw[:n]


class GbnfWalker:
    def __init__(self, vocab: Any, n_vocab: int, gbnf: str) -> None:
        import llama_cpp

        self._llama_cpp = llama_cpp
        self._n = n_vocab
        self._sampler = llama_cpp.llama_sampler_init_grammar(vocab, gbnf.encode(), b"root")
        if not self._sampler:
            # llama.cpp logs the parse error and returns no sampler
            raise ValueError(f"llama_sampler_init_grammar refused the grammar {gbnf!r}")

    def allowed(self) -> list[int]:
        L = self._llama_cpp
        cand = np.zeros(self._n, dtype=TOKEN_DATA)
        cand["id"] = np.arange(self._n, dtype=np.int32)
        arr = L.llama_token_data_array(
            data=ctypes.cast(cand.ctypes.data, ctypes.POINTER(L.llama_token_data)),
            size=self._n,
            selected=-1,
            sorted=False,
        )
        L.llama_sampler_apply(self._sampler, ctypes.byref(arr))
        # the grammar sampler masks in place (it never reorders or shrinks the array): read it back
        kept = cand[: arr.size]
        return sorted(int(t) for t in kept["id"][np.isfinite(kept["logit"])])

    def advance(self, token: int) -> None:
        self._llama_cpp.llama_sampler_accept(self._sampler, token)

    def __del__(self) -> None:
        if getattr(self, "_sampler", None):
            self._llama_cpp.llama_sampler_free(self._sampler)


class GbnfTokenizerData:
    def __init__(self, llm: Any) -> None:
        import llama_cpp

        self._llm = llm  # the vocab pointer lives as long as the model
        self.vocab = llama_cpp.llama_model_get_vocab(llm.model)
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(self.vocab))
        eog = [t for t in range(self.n_vocab) if llama_cpp.llama_vocab_is_eog(self.vocab, t)]
        cache = [piece(self.vocab, t) for t in range(self.n_vocab)]
        skip = set(eog)
        self.table = {t: p for t, p in enumerate(cache) if t not in skip and p and p[0] != 0}
        self.notes = {
            "eog": " ".join(map(str, eog)),
            # the tokens its mask never admits as text: an empty piece, or one that starts with NUL
            "never_text": str(sum(1 for t, p in enumerate(cache) if t not in skip and (not p or p[0] == 0))),
        }

    def walker(self, pattern: Pattern) -> GbnfWalker:
        return GbnfWalker(self.vocab, self.n_vocab, pattern.gbnf)


def make_tokenizer_data(llm: Any) -> GbnfTokenizerData:
    return GbnfTokenizerData(llm)
