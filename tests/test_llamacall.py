"""The compiled binding of llama.h's per-token vocab calls (`llgbridge._llamacall`) answers as
llama-cpp-python's own ctypes bindings do, byte for byte, on every token; and where llama.cpp
would throw through its C caller (a token outside the vocab) or overrun (a length past the
buffer), it raises instead."""

from __future__ import annotations

import ctypes
from array import array

import llama_cpp
import pytest
from conftest import vocab

from llgbridge import _llamacall
from llgbridge.vocab import MAX_PIECE


def _bindings_piece(v, t: int, lstrip: int, special: bool) -> bytes:
    buf = ctypes.create_string_buffer(MAX_PIECE)
    n = llama_cpp.llama_token_to_piece(v.llama_vocab, t, buf, MAX_PIECE, lstrip, special)
    return buf.raw[:n]


def _bindings_detok(v, tokens: list[int], remove_special: bool, unparse_special: bool) -> bytes:
    buf = ctypes.create_string_buffer(MAX_PIECE)
    arr = (llama_cpp.llama_token * len(tokens))(*tokens)
    n = llama_cpp.llama_detokenize(v.llama_vocab, arr, len(tokens), buf, MAX_PIECE, remove_special, unparse_special)
    return buf.raw[:n]


@pytest.mark.parametrize("name", ["llama-spm", "llama-bpe", "bert-bge", "gemma-4"])
def test_the_binding_answers_as_llama_cpp_pythons_bindings_on_every_token(name: str) -> None:
    v = vocab(name)
    step = max(1, v.n_tokens // 4000)  # every token of the small vocabs' share, spread over the large ones
    for t in [*range(0, v.n_tokens, step), v.n_tokens - 1]:
        for lstrip, special in ((0, False), (1, False), (0, True)):
            assert v.token_to_piece(t, lstrip, special) == _bindings_piece(v, t, lstrip, special), (t, lstrip, special)
        for rs, us in ((False, False), (True, True)):
            assert v.detokenize([t], rs, us) == _bindings_detok(v, [t], rs, us), (t, rs, us)
    seq = list(range(100, 140))
    assert v.detokenize(seq) == _bindings_detok(v, seq, False, False)


def test_a_token_outside_the_vocab_raises_where_llama_cpp_would_throw() -> None:
    v = vocab("llama-spm")
    buf = bytearray(MAX_PIECE)
    for bad in (-1, v.n_tokens, 2**31 - 1):
        with pytest.raises(IndexError, match=f"token {bad}: outside the vocab's 32000 tokens"):
            _llamacall.token_to_piece(v.llama_vocab, bad, buf, MAX_PIECE, 0, False)
        with pytest.raises(IndexError, match=f"token {bad}: outside the vocab's 32000 tokens"):
            _llamacall.detokenize(v.llama_vocab, array("i", [5, bad]), 2, buf, MAX_PIECE, False, False)


def test_a_length_past_the_buffer_or_a_short_token_buffer_is_refused() -> None:
    v = vocab("llama-spm")
    with pytest.raises(ValueError, match="length 2048: outside the buffer's 1024 bytes"):
        _llamacall.token_to_piece(v.llama_vocab, 5, bytearray(MAX_PIECE), 2048, 0, False)
    with pytest.raises(ValueError, match="n_tokens 3: outside the buffer's 2 tokens"):
        _llamacall.detokenize(v.llama_vocab, array("i", [5, 6]), 3, bytearray(MAX_PIECE), MAX_PIECE, False, False)
    with pytest.raises(TypeError, match="a buffer of int32"):
        _llamacall.detokenize(v.llama_vocab, array("q", [5]), 1, bytearray(MAX_PIECE), MAX_PIECE, False, False)
    with pytest.raises(TypeError, match="buf: a bytearray, not bytes"):
        _llamacall.token_to_piece(v.llama_vocab, 5, bytes(MAX_PIECE), MAX_PIECE, 0, False)


def test_a_piece_longer_than_the_length_asks_for_its_size_as_llama_cpp_does() -> None:
    v = vocab("llama-spm")
    t = next(t for t in range(v.n_tokens) if len(v.token_to_piece(t)) >= 4)
    want = len(v.token_to_piece(t))
    assert _llamacall.token_to_piece(v.llama_vocab, t, bytearray(MAX_PIECE), 2, 0, False) == -want
