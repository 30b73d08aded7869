"""The sentinel bridge: a port of llguidance's own llama.cpp integration, checked against it.

The yardstick is llguidance's Python integration itself (`llguidance.llamacpp`), run on the same
vocab: same tokens for the same bytes, same token table, same refusals with the same reasons.
"""

from __future__ import annotations

import pytest
from conftest import bridge, variant, vocab
from llguidance.llamacpp import lltokenizer_from_vocab

from llgbridge.analyses.exactness import compute as ex
from llgbridge.bridges import make_bridge
from llgbridge.errors import InputError

INPUTS = ex.inputs(seed=0, n=300)
LLG_WARNS = pytest.mark.filterwarnings("ignore:llama_token_get_attr is deprecated")  # llamacpp.py's own call


def test_sentinel_on_llama_spm_prepends_byte_1_and_strips_its_two_tokens() -> None:
    b = bridge("llama-spm", "sentinel")
    assert b.sentinel == 1
    assert [vocab("llama-spm").token_to_piece(t) for t in b.sentinel_tokens] == [b" ", b"\x01"]
    assert b.token_bytes[vocab("llama-spm").bos] == b"\xff<s>"


@pytest.mark.parametrize("name", ["llama-bpe", "gemma-4", "qwen35"])
def test_sentinel_is_not_needed_where_llama_tokenize_gives_a_back(name: str) -> None:
    b = bridge(name, "sentinel")
    assert (b.sentinel, b.sentinel_tokens) == (None, [])


@pytest.mark.guards("bug B: upstream's tokenize_fn adds SentencePiece's space")
@pytest.mark.parametrize("text", [b"The", b"a b", b"1\n2", b"hello world"])
def test_sentinel_tokenizes_exactly_where_upstream_adds_a_space(text: bytes) -> None:
    v = vocab("llama-spm")
    assert v.real_bytes(bridge("llama-spm", variant("sentinel")).tokenize(text)) == text
    assert v.real_bytes(bridge("llama-spm", variant("upstream")).tokenize(text)) == b" " + text


@LLG_WARNS
@pytest.mark.parametrize("name", ["llama-spm", "llama-bpe"])
def test_sentinel_matches_llguidances_own_llama_cpp_integration(name: str) -> None:
    ours = bridge(name, "sentinel")
    theirs = lltokenizer_from_vocab(vocab(name).llama_vocab)
    assert [ours.tokenize(x) for x in INPUTS] == [theirs.tokenize_bytes(x) for x in INPUTS]
    table = [b[1:] if b[:1] == b"\xff" else b for b in ours.token_bytes]  # decode_bytes drops the marker
    assert table == [theirs.decode_bytes([t]) for t in range(vocab(name).n_tokens)]
    assert ours.callback_failures == 0


@LLG_WARNS
@pytest.mark.parametrize(
    "name, reason",
    [
        ("bert-bge", "eos_token must be an int or a non-empty list of ints"),
        ("nomic-bert-moe", "could not find a good sentinel token in the range 1..32"),
    ],
)
def test_sentinel_refuses_what_llguidance_refuses_with_its_reason(name: str, reason: str) -> None:
    with pytest.raises(InputError, match=reason) as e:
        make_bridge(vocab(name), "sentinel")
    assert f"ggml-vocab-{name}.gguf" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(Exception, match=reason):
        lltokenizer_from_vocab(vocab(name).llama_vocab)
