"""The sentinel bridge: a port of llguidance's own llama.cpp integration, checked against it.

The yardstick is llguidance's Python integration itself (`llguidance.llamacpp`), run on the same
vocab: same tokens for the same bytes, same token table, same refusals with the same reasons.
"""

from __future__ import annotations

import pytest
from conftest import bridge, variant, vocab
from llguidance.llamacpp import lltokenizer_from_vocab

from llgbridge.analyses.exactness import compute as ex
from llgbridge.bridges import OwnBridge, Sentinel, make_bridge
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


# -- candidate 0007 (ownbridge): this design written into common/llguidance.cpp, beside the PR ---------
@pytest.mark.guards("bug B: the PR gives byte forcing up on SentencePiece")
def test_ownbridge_keeps_byte_forcing_on_llama_spm_behind_byte_1() -> None:
    v = vocab("llama-spm")
    b = bridge("llama-spm", variant("ownbridge"))
    assert (b.forcing, b.greedy) == (True, False)
    assert [v.token_to_piece(t) for t in getattr(b, "sentinel_tokens", [])] == [b" ", b"\x01"]  # none on `fixed`
    assert [v.token_to_piece(t) for t in b.tokenize(b"The a b")] == [b"The", b" a", b" b"]


@pytest.mark.parametrize("name", ["llama-spm", "llama-bpe"])
def test_ownbridge_has_the_sentinel_bridges_table_and_tokens(name: str) -> None:
    ours, theirs = bridge(name, "ownbridge"), bridge(name, "sentinel")
    assert ours.token_bytes == theirs.token_bytes
    assert [ours.tokenize(x) for x in INPUTS] == [theirs.tokenize(x) for x in INPUTS]
    assert ours.callback_failures == 0


def test_ownbridge_ends_on_llama_cpps_end_token_where_llguidance_takes_eos() -> None:
    """llama.cpp's own test reads a match from its end token, EOT else EOS: the candidate keeps it."""
    v = vocab("llama-bpe")
    ours, theirs = bridge("llama-bpe", "ownbridge"), bridge("llama-bpe", "sentinel")
    assert isinstance(ours, OwnBridge) and isinstance(theirs, Sentinel)
    assert [v.token_to_piece(b.tok_eos, special=True) for b in (ours, theirs)] == [b"<|eot_id|>", b"<|end_of_text|>"]


@pytest.mark.parametrize("name", ["bert-bge", "nomic-bert-moe"])
def test_ownbridge_takes_the_prs_greedy_path_where_the_sentinel_bridge_refuses(name: str) -> None:
    """No byte 1..31 is a token of its own on these (WPM, UGM), so there is no sentinel: no tokenize_fn
    and llguidance's greedy tokenizer on the same table, where llguidance's own bridge refuses; bert-bge,
    with no EOS, is not refused for that."""
    b = bridge(name, "ownbridge")
    assert isinstance(b, OwnBridge) and (b.forcing, b.greedy) == (False, True)
    assert b.refusal == "could not find a good sentinel token in the range 1..32"
    assert b"".join(b.token_bytes[t] for t in b.tokenize(b"hello world")) == b"hello world"
