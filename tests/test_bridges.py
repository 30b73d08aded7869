"""Both bridge variants build on every fixture; their token tables hold the bytes the guide says."""
from __future__ import annotations

import gc

import pytest

from conftest import ALL_VOCABS, bridge, variant, vocab
from llgbridge import bridges, guide
from llgbridge.errors import InputError


@pytest.mark.parametrize("name", ALL_VOCABS)
@pytest.mark.parametrize("var", list(bridges.VARIANTS))
def test_every_variant_builds_on_every_fixture(name: str, var: str) -> None:
    if var == "sentinel" and name in ("bert-bge", "nomic-bert-moe"):
        # llguidance's own llama.cpp integration refuses these (no EOS / no usable sentinel)
        with pytest.raises(InputError, match=f"ggml-vocab-{name}.gguf: "):
            bridges.build(vocab(name), var)
        return
    b = bridge(name, var)
    assert len(b.token_bytes) == vocab(name).n_tokens


@pytest.mark.guards("bug A: token_bytes from llama_detokenize")
@pytest.mark.parametrize("name", sorted(guide.EXAMPLES))
def test_fixed_table_holds_the_real_piece(name: str) -> None:
    tok, piece, _ = guide.EXAMPLES[name]
    assert bridge(name, variant("fixed")).token_bytes[tok] == piece


@pytest.mark.guards("documents bug A as upstream ships it")
@pytest.mark.parametrize("name", sorted(guide.EXAMPLES))
def test_upstream_table_holds_the_detokenized_bytes(name: str) -> None:
    tok, _, detok = guide.EXAMPLES[name]
    assert bridge(name, variant("upstream")).token_bytes[tok] == detok


def test_special_tokens_get_the_marker() -> None:
    v = vocab("llama-spm")
    for var in bridges.VARIANTS:
        assert bridge("llama-spm", var).token_bytes[v.bos] == b"\xff<s>"


@pytest.mark.parametrize(
    "name, exact, failed, got",
    [("llama-spm", False, b"The", b" The"), ("llama-bpe", True, None, None)],
)
def test_probe_verdict(name: str, exact: bool, failed: bytes | None, got: bytes | None) -> None:
    r = bridges.probe_tokenize_exact(vocab(name))
    assert (r.exact, r.failed_probe, r.got) == (exact, failed, got)


@pytest.mark.parametrize("name, greedy", [("llama-spm", True), ("llama-bpe", False)])
def test_fixed_engages_greedy_exactly_when_the_probe_fails(name: str, greedy: bool) -> None:
    b = bridge(name, "fixed")
    assert (b.greedy, b.forcing) == (greedy, not greedy)


def test_upstream_always_forces() -> None:
    b = bridge("llama-spm", "upstream")
    assert (b.greedy, b.forcing) == (False, True)


def test_unknown_bridge_is_a_one_line_error() -> None:
    with pytest.raises(InputError, match=r"^bridge 'nope': unknown bridge; choose one of upstream, fixed, sentinel, truth$"):
        bridges.build(vocab("llama-spm"), "nope")


def test_tokenize_callback_outlives_python_references() -> None:
    # llguidance calls tokenize_fn while computing a forced mask; the matcher must keep
    # the callback (and the vocab) alive after every other reference is gone.
    m = bridges.build(vocab("llama-bpe"), "upstream").new_matcher('start: "hello world"')
    gc.collect()
    assert m.allowed() == [15339]
    assert m.bridge.tokenize(b"hello world") == vocab("llama-bpe").tokenize(b"hello world")


def test_bad_grammar_is_a_one_line_error() -> None:
    with pytest.raises(InputError, match=r"^lark grammar 'start: /\[unclosed/': llguidance rejected it") as e:
        bridge("llama-bpe", "fixed").new_matcher("start: /[unclosed/")
    assert "\n" not in str(e.value)
