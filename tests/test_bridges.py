"""Every bridge builds on every fixture (or refuses it as llguidance does); token tables hold the
bytes the guide says; the matcher keeps its callback alive; bad names and grammars are one line."""
from __future__ import annotations

import gc

import pytest

from conftest import ALL_VOCABS, bridge, variant, vocab
from llgbridge import bridges, guide
from llgbridge.errors import InputError


@pytest.mark.parametrize("name", ALL_VOCABS)
@pytest.mark.parametrize("var", bridges.VARIANTS)
def test_every_variant_builds_on_every_fixture(name: str, var: str) -> None:
    if var == "sentinel" and name in ("bert-bge", "nomic-bert-moe"):
        # llguidance's own llama.cpp integration refuses these (no EOS / no usable sentinel)
        with pytest.raises(InputError, match=f"ggml-vocab-{name}.gguf: "):
            bridges.build(vocab(name), var)
        return
    b = bridge(name, var)
    assert len(b.token_bytes) == vocab(name).n_tokens


@pytest.mark.guards("bug A: token_bytes from llama_detokenize")
@pytest.mark.parametrize(
    "name, good",
    # llguidance's own integration refuses bert-bge (no EOS): see test_every_variant_builds...
    [(n, g) for n in sorted(guide.EXAMPLES) for g in ("fixed", "sentinel") if (n, g) != ("bert-bge", "sentinel")],
)
def test_fixed_and_sentinel_tables_hold_the_real_piece(name: str, good: str) -> None:
    tok, piece, _ = guide.EXAMPLES[name]
    assert bridge(name, variant(good)).token_bytes[tok] == piece


@pytest.mark.guards("documents bug A as upstream ships it")
@pytest.mark.parametrize("name", sorted(guide.EXAMPLES))
def test_upstream_table_holds_the_detokenized_bytes(name: str) -> None:
    tok, _, detok = guide.EXAMPLES[name]
    assert bridge(name, variant("upstream")).token_bytes[tok] == detok


def test_special_tokens_get_the_marker() -> None:
    v = vocab("llama-spm")
    for var in bridges.VARIANTS:
        assert bridge("llama-spm", var).token_bytes[v.bos] == b"\xff<s>"


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
    assert m.owner.tokenize(b"hello world") == vocab("llama-bpe").tokenize(b"hello world")


def test_bad_grammar_is_a_one_line_error() -> None:
    with pytest.raises(InputError, match=r"^lark grammar 'start: /\[unclosed/': llguidance rejected it") as e:
        bridge("llama-bpe", "fixed").new_matcher("start: /[unclosed/")
    assert "\n" not in str(e.value)
