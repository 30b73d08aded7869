"""Tokenize exactness (guide 5.2, 5.3, 10 rows 2 and 4): do the tokens llguidance gets spell its input?

Asserted as properties of the seeded inputs, each set against a computation that does not go
through llguidance (llama.cpp's own `llama_tokenize`, or a hand-checked tokenization), never as
counts this suite printed before.
"""

from __future__ import annotations

from functools import cache

import pytest
from conftest import bridge, variant, vocab

from llgbridge.analyses.exactness import compute as ex

INPUTS = ex.inputs(seed=0, n=300)


@cache
def exact(name: str, var: str) -> ex.ExactnessResult:
    return ex.exactness(bridge(name, var), INPUTS)


def parsed_specials(name: str) -> list[bytes]:
    """The SPECIAL_TEXTS that llama.cpp itself (parse_special=true) turns into one token with no bytes."""
    v = vocab(name)
    return [s for s in ex.SPECIAL_TEXTS if len(t := v.tokenize(s)) == 1 and v.token_to_piece(t[0]) == b""]


# -- the inputs ---------------------------------------------------------------------------------
def test_inputs_are_seeded_and_cover_every_kind() -> None:
    assert ex.inputs(0, 300) == INPUTS and ex.inputs(1, 300) != INPUTS
    assert len(set(INPUTS)) == 300
    assert any(not ex.valid_utf8(x) for x in INPUTS)
    assert any(x.startswith(b" ") for x in INPUTS)
    assert any(set(x) <= set(b" \t\n") for x in INPUTS)
    assert any(b"<s>" in x for x in INPUTS)
    assert set(INPUTS) & set(ex.inp_texts())


def test_inputs_depend_only_on_the_seed_and_the_texts_given() -> None:
    texts = (b"first whole text", b"second whole text")
    got = ex.inputs(0, 300, texts)
    assert got == ex.inputs(0, 300, texts)
    long = {t for t in ex.inp_texts() if len(t) > 60}  # no other kind of input is that long
    assert set(texts) <= set(got) and not long & set(got) and long & set(INPUTS)
    # by default, the texts of the .inp files the manifest lists (not whatever lies in data/vocabs)
    assert ex.inputs(0, 300, ex.inp_texts()) == INPUTS


def test_minimize_is_greedy_byte_deletion() -> None:
    assert ex.minimize(lambda b: b"q" in b and b"z" in b, b"abqcdzef") == b"qz"


def test_canonical_in_context_keeps_spms_space_away() -> None:
    v = vocab("llama-spm")
    assert [v.token_to_piece(t) for t in ex.canonical(v, b"The")] == [b"The"]
    assert [v.token_to_piece(t) for t in ex.canonical(v, b" The")] == [b" The"]


# -- exactness per bridge -----------------------------------------------------------------------
@pytest.mark.guards("bug B: upstream's tokenize_fn adds SentencePiece's space")
def test_upstream_adds_a_space_to_every_text_on_llama_spm() -> None:
    v = vocab("llama-spm")
    b = bridge("llama-spm", variant("upstream"))
    r = exact("llama-spm", variant("upstream"))
    assert r.tokenizer == "tokenize_fn"
    specials = parsed_specials("llama-spm")
    texts = [x for x in INPUTS if ex.valid_utf8(x) and not any(s in x for s in specials)]
    # guide 5.1: llama_tokenize("The") is ' The'; the same for every text without special tokens
    assert [v.real_bytes(b.tokenize(x)) for x in texts] == [b" " + x for x in texts]
    assert set(texts) <= set(r.failures)
    assert r.shortest and all(len(f.minimized) == 1 and f.minimized_got == b" " + f.minimized for f in r.shortest)


@pytest.mark.guards("bug B: the fix falls back to llguidance's greedy tokenizer on SPM")
def test_fixed_greedy_path_is_exact_on_llama_spm_but_not_canonical() -> None:
    r = exact("llama-spm", variant("fixed"))
    assert (r.tokenizer, r.failures) == ("greedy", [])
    # by hand: greedy takes the longest token first ("  "), llama.cpp's SentencePiece prefers the
    # word-start token " The"
    v, b = vocab("llama-spm"), bridge("llama-spm", variant("fixed"))
    assert [v.token_to_piece(t) for t in b.tokenize(b"  The")] == [b"  ", b"The"]
    assert [v.token_to_piece(t) for t in ex.canonical(v, b"  The")] == [b" ", b" The"]


def test_sentinel_is_exact_on_llama_spm_and_canonical_on_valid_utf8() -> None:
    r = exact("llama-spm", "sentinel")
    assert (r.tokenizer, r.failures) == ("tokenize_fn", [])
    # it differs from llama.cpp in context only where llguidance's greedy fallback takes over
    assert r.canon_differing and all(not ex.valid_utf8(x) for x in r.canon_differing)


def test_on_llama_bpe_only_parsed_special_text_is_inexact() -> None:
    up, sen = exact("llama-bpe", "upstream"), exact("llama-bpe", "sentinel")
    specials = parsed_specials("llama-bpe")
    assert specials == [b"<|eot_id|>", b"<|begin_of_text|>"]
    assert set(up.failures) == {x for x in INPUTS if any(s in x for s in specials)}
    assert up.failures and up.special_failures == len(up.failures)
    assert [(f.minimized, f.minimized_got) for f in up.shortest] == [(s, b"") for s in specials]
    assert (sen.failures, sen.canon_differing) == ([], [])  # parse_special=false keeps it text


# -- the PR's probe against the inputs ----------------------------------------------------------
def test_probe_and_inputs_agree_on_llama_spm() -> None:
    r = ex.probe_vs_exactness(vocab("llama-spm"), bridge("llama-spm", "upstream"), INPUTS)
    row = r.row()
    assert (row["probe_exact"], row["inputs_exact"], row["agree"], row["cell"]) == (False, False, True, "both inexact")
    assert (r.probe.failed_probe, r.probe.got, r.witness) == (b"The", b" The", None)


def test_probe_misses_parsed_special_text_on_llama_bpe() -> None:
    r = ex.probe_vs_exactness(vocab("llama-bpe"), bridge("llama-bpe", "upstream"), INPUTS)
    assert (r.probe.exact, r.inputs_exact, r.agree) == (True, False, False)
    assert r.cell == "probe misses (keeps an inexact tokenize_fn)"
    assert (r.witness, r.witness_got) == (b"<|eot_id|>", b"")
    assert r.row()["inexact_only_specials"] is True
