"""Leak and forced-mask tests (guide 4.4, 5.1, 7.1, 7.2), asserted on bytes, not counts."""
from __future__ import annotations

from functools import cache

import pytest

from conftest import bridge, variant, vocab
from llgbridge import guide, masks


@cache
def leak(name: str, var: str) -> masks.LeakResult:
    return masks.leak_test(bridge(name, var), bridge(name, "truth"), guide.LEAK_GRAMMAR)


@cache
def forced(name: str, var: str) -> masks.ForcedResult:
    return masks.forced_test(bridge(name, var), guide.FORCED_LITERAL)


def pieces(name: str, tokens: list[int]) -> list[bytes]:
    return [vocab(name).token_to_piece(t) for t in tokens]


@pytest.mark.guards("documents bug A: upstream leaks the guide's six pieces on llama-bpe")
def test_upstream_leaks_the_guides_six_pieces_on_llama_bpe() -> None:
    r = leak("llama-bpe", variant("upstream"))
    assert sorted(pieces("llama-bpe", r.with_space)) == sorted(guide.LEAK_BPE_PIECES)
    assert r.illegal == r.with_space


@pytest.mark.guards("bug A: token_bytes from llama_detokenize")
@pytest.mark.parametrize("name", ["llama-bpe", "llama-spm", "gemma-4", "bert-bge"])
def test_fixed_allows_no_illegal_token(name: str) -> None:
    r = leak(name, variant("fixed"))
    bad = pieces(name, r.illegal)
    assert bad == [], f"allowed but illegal: {bad[:10]}"


@pytest.mark.parametrize("name", sorted(guide.LEAK))
def test_leak_counts_match_the_guide(name: str) -> None:
    assert (len(leak(name, "upstream").with_space), len(leak(name, "fixed").with_space)) == guide.LEAK[name]


def test_every_upstream_leak_really_contains_a_space_on_the_guides_vocabs() -> None:
    for name in guide.LEAK:
        r = leak(name, "upstream")
        assert all(b" " in p for p in pieces(name, r.with_space))


@pytest.mark.guards("documents bug B: upstream forces ' hello' on llama-spm")
def test_upstream_forces_the_wrong_token_on_llama_spm() -> None:
    r = forced("llama-spm", variant("upstream"))
    assert list(zip(r.allowed, r.pieces)) == [(guide.FORCED_SPM_TOKEN, b" hello")]
    assert r.not_prefix == [guide.FORCED_SPM_TOKEN]


def test_upstream_matcher_dies_on_llama_spm_with_llguidances_message() -> None:
    r = forced("llama-spm", "upstream")
    # the guide quotes the same failure on "quick"; here the literal's second word
    assert masks.first_line(r.error) == "Parser Error: token \"world\" doesn't satisfy the grammar; forced bytes: got ' '; applying 'w'"
    assert r.output == b" hello world"


@pytest.mark.guards("bug B: tokenize_fn prepends a space on SentencePiece")
def test_fixed_allows_only_prefixes_on_llama_spm() -> None:
    r = forced("llama-spm", variant("fixed"))
    assert sorted(r.pieces) == sorted(guide.FORCED["llama-spm"][1])
    assert all(guide.FORCED_LITERAL.encode().startswith(p) for p in r.pieces)
    assert (r.error, r.output) == ("", b"hello world")


@pytest.mark.parametrize("var", ["upstream", "fixed"])
def test_llama_bpe_forces_hello_either_way(var: str) -> None:
    r = forced("llama-bpe", var)
    assert list(zip(r.allowed, r.pieces)) == [(15339, b"hello")]
    assert (r.error, r.output) == ("", b"hello world")


def test_tokenizer_state_shows_the_space_prefix() -> None:
    cases = {(c.text, c.add_special): c for c in masks.tokenizer_state(vocab("llama-spm"), [b"The"])}
    assert cases[(b"The", False)].tokens == [450] and cases[(b"The", False)].pieces == [b" The"]
    assert cases[(b"The", True)].tokens == [1, 450]
    cases = {(c.text, c.add_special): c for c in masks.tokenizer_state(vocab("llama-bpe"), [b"The"])}
    assert cases[(b"The", False)].exact


def test_probe_rows() -> None:
    spm, bpe = masks.probe_row(vocab("llama-spm")), masks.probe_row(vocab("llama-bpe"))
    assert (spm["tokenize_exact"], spm["failed_probe"], spm["greedy"]) == (False, "The", True)
    assert (bpe["tokenize_exact"], bpe["failed_probe"], bpe["greedy"]) == (True, "", False)
