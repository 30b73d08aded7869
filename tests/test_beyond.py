"""Beyond the PR: llguidance's own sentinel bridge, tokenize exactness by fuzzing, mask soundness.

Asserted on bytes where there are bytes; the fuzz and the battery are seeded, so every figure
here is reproducible.
"""
from __future__ import annotations

from functools import cache

import pytest
from llguidance.llamacpp import lltokenizer_from_vocab

from conftest import bridge, variant, vocab
from llgbridge import exactness as ex
from llgbridge import guide, soundness
from llgbridge.bridges import build
from llgbridge.errors import InputError

FUZZ = ex.fuzz_inputs(seed=0, n=300)


@cache
def exact(name: str, var: str) -> ex.ExactnessResult:
    return ex.exactness(bridge(name, var), FUZZ)


@cache
def sound(name: str, var: str) -> soundness.SoundnessResult:
    return soundness.soundness(bridge(name, "truth"), [bridge(name, var)])[var]


def real(name: str, tokens: list[int]) -> bytes:
    return vocab(name).reassemble(tokens)


# -- the sentinel bridge ------------------------------------------------------------------------
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
    assert real("llama-spm", bridge("llama-spm", "sentinel").tokenize(text)) == text
    assert real("llama-spm", bridge("llama-spm", variant("upstream")).tokenize(text)) == b" " + text


LLG_WARNS = pytest.mark.filterwarnings("ignore:llama_token_get_attr is deprecated")  # llamacpp.py's own call


@LLG_WARNS
@pytest.mark.parametrize("name", ["llama-spm", "llama-bpe"])
def test_sentinel_matches_llguidances_own_llama_cpp_integration(name: str) -> None:
    ours = bridge(name, "sentinel")
    theirs = lltokenizer_from_vocab(vocab(name).vocab)
    assert [ours.tokenize(x) for x in FUZZ] == [theirs.tokenize_bytes(x) for x in FUZZ]
    table = [b[1:] if b[:1] == b"\xff" else b for b in ours.token_bytes]  # decode_bytes drops the marker
    assert table == [theirs.decode_bytes([t]) for t in range(vocab(name).n_tokens)]
    assert ours.sentinel_failures == 0


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
        build(vocab(name), "sentinel")
    assert f"ggml-vocab-{name}.gguf" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(Exception, match=reason):
        lltokenizer_from_vocab(vocab(name).vocab)


# -- exactness ----------------------------------------------------------------------------------
def test_fuzz_inputs_are_seeded_and_cover_every_kind() -> None:
    assert ex.fuzz_inputs(0, 300) == FUZZ and ex.fuzz_inputs(1, 300) != FUZZ
    assert len(set(FUZZ)) == 300
    assert any(not ex.valid_utf8(x) for x in FUZZ)
    assert any(x.startswith(b" ") for x in FUZZ)
    assert any(set(x) <= set(b" \t\n") for x in FUZZ)
    assert b"<s>" in FUZZ or any(b"<s>" in x for x in FUZZ)
    assert set(FUZZ) & set(ex._inp_lines())


def test_minimize_is_greedy_byte_deletion() -> None:
    assert ex.minimize(lambda b: b"q" in b and b"z" in b, b"abqcdzef") == b"qz"


def test_canonical_in_context_keeps_spms_space_away() -> None:
    v = vocab("llama-spm")
    assert [v.token_to_piece(t) for t in ex.canonical(v, b"The")] == [b"The"]
    assert [v.token_to_piece(t) for t in ex.canonical(v, b" The")] == [b" The"]


@pytest.mark.guards("bug B: upstream's tokenize_fn adds SentencePiece's space")
def test_upstream_tokenize_fails_on_llama_spm_and_minimizes_to_one_byte() -> None:
    r = exact("llama-spm", variant("upstream"))
    assert r.tokenizer == "tokenize_fn"
    assert len(r.failures) == 298  # all but two of the 300 inputs
    assert [(f.minimized, f.minimized_got) for f in r.shortest] == [
        (b"\t", b" \t"), (b"\n", b" \n"), (b" ", b"  "), (b"1", b" 1"), (b"3", b" 3"),
    ]  # fmt: skip
    assert real("llama-spm", bridge("llama-spm", variant("upstream")).tokenize(b"a")) == b" a"


@pytest.mark.guards("bug B: the fix falls back to llguidance's greedy tokenizer on SPM")
def test_fixed_greedy_path_is_exact_on_llama_spm_but_not_canonical() -> None:
    r = exact("llama-spm", variant("fixed"))
    assert (r.tokenizer, r.failures) == ("greedy", [])
    assert (r.canon_defined, r.canon_differs, r.canon_differs_utf8) == (294, 239, 193)


def test_sentinel_is_exact_on_llama_spm_and_canonical_on_valid_utf8() -> None:
    r = exact("llama-spm", "sentinel")
    assert (r.tokenizer, r.failures) == ("tokenize_fn", [])
    # it differs from llama.cpp in context only where llguidance's greedy fallback takes over
    assert (r.canon_differs, r.canon_differs_utf8) == (23, 0)


def test_on_llama_bpe_only_parsed_special_text_is_inexact() -> None:
    up, sen = exact("llama-bpe", "upstream"), exact("llama-bpe", "sentinel")
    assert len(up.failures) == up.special_failures == 8
    assert [(f.minimized, f.minimized_got) for f in up.shortest] == [(b"<|eot_id|>", b""), (b"<|begin_of_text|>", b"")]
    assert (sen.failures, sen.canon_differs) == ([], 0)  # parse_special=false keeps it text


def test_probe_and_fuzz_agree_on_llama_spm() -> None:
    r = ex.probe_vs_fuzz(vocab("llama-spm"), bridge("llama-spm", "upstream"), FUZZ)
    row = r.row()
    assert (row["probe_exact"], row["fuzz_exact"], row["agree"], row["cell"]) == (False, False, True, "both inexact")
    assert (r.probe.failed_probe, r.probe.got, r.witness) == (b"The", b" The", None)


def test_probe_misses_parsed_special_text_on_llama_bpe() -> None:
    r = ex.probe_vs_fuzz(vocab("llama-bpe"), bridge("llama-bpe", "upstream"), FUZZ)
    assert (r.probe.exact, r.fuzz_exact, r.agree) == (True, False, False)
    assert r.cell == "probe misses (keeps an inexact tokenize_fn)"
    assert (r.witness, r.witness_got) == (b"<|eot_id|>", b"")
    assert r.row()["fuzz_exact_but_specials"] is True


# -- soundness ----------------------------------------------------------------------------------
def test_battery_has_the_grammars_asked_for_and_samples_for_each() -> None:
    assert soundness.BATTERY["regex"] == guide.LEAK_GRAMMAR
    assert sum("%json" in g for g in soundness.BATTERY.values()) >= 3
    assert set(soundness.SAMPLES) == set(soundness.BATTERY)


@pytest.mark.guards("bug A: upstream's token table from llama_detokenize")
def test_upstream_under_constrains_the_regex_on_llama_bpe() -> None:
    b = bridge("llama-bpe", variant("upstream"))
    r = sound("llama-bpe", variant("upstream"))
    assert r.under > 0
    worst = r.worst(1)[0]
    assert (worst.grammar, worst.step, worst.prefix) == ("regex", 0, b"")
    assert sorted(b.vocab.token_to_piece(t) for t in worst.under) == sorted(guide.LEAK_BPE_PIECES)


@pytest.mark.guards("bugs A and B: the fix allows nothing illegal")
@pytest.mark.parametrize("name", ["llama-bpe", "llama-spm"])
def test_fixed_never_under_constrains_on_any_grammar(name: str) -> None:
    r = sound(name, variant("fixed"))
    assert (r.errors, r.skipped) == ([], [])
    assert {d.grammar for d in r.diffs if d.n_under} == set()
    assert r.under == 0 and r.walks >= sum(map(len, soundness.SAMPLES.values()))


def test_fixed_on_llama_spm_matches_the_truth_exactly() -> None:
    r = sound("llama-spm", "fixed")
    assert (r.under, r.over, r.stop_disagree) == (0, 0, 0)


def test_fixed_on_llama_bpe_narrows_only_where_it_forces() -> None:
    r = sound("llama-bpe", "fixed")
    assert r.over > 0 and r.over == r.over_collapsed


def test_upstream_matcher_dies_on_llama_spm_with_llguidances_message() -> None:
    r = sound("llama-spm", "upstream")
    assert ("literal", guide.FORCED_LITERAL, 1) == r.errors[0][:3]
    assert "token \"world\" doesn't satisfy the grammar; forced bytes: got ' '; applying 'w'" in r.errors[0][3]


def test_sentinel_allows_unk_inside_json_strings_on_llama_spm() -> None:
    # llamacpp.py marks CONTROL and <...> USER_DEFINED tokens only: <unk> (UNKNOWN) stays text
    r = sound("llama-spm", "sentinel")
    assert {t for d in r.diffs for t in d.under} == {0}
    assert {d.grammar for d in r.diffs if d.n_under} == {"json_nested"}
    assert vocab("llama-spm").token_to_piece(0) == b""
    assert bridge("llama-spm", "sentinel").token_bytes[0] == b"<unk>"
