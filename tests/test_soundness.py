"""Mask soundness over the grammar battery (guide 4.4, 6, 10 row 1): each bridge against the truth.

The truth is llguidance fed real bytes with forcing off; where a figure is asserted it is the
guide's (its six leaked llama-bpe pieces), or a property (nothing under-constrained, narrowing
only where forcing collapses the mask).
"""
from __future__ import annotations

from functools import cache

import pytest

from conftest import bridge, variant, vocab
from llgbridge import grammars, guide, soundness


@cache
def sound(name: str, var: str) -> soundness.SoundnessResult:
    return soundness.soundness(bridge(name, "truth"), [bridge(name, var)])[var]


def test_battery_has_the_guides_grammars_and_samples_for_each() -> None:
    assert soundness.BATTERY["regex"] == grammars.LEAK_GRAMMAR
    assert soundness.BATTERY["literal"] == grammars.literal_grammar(grammars.FORCED_LITERAL)
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
@pytest.mark.parametrize(
    "name, good",
    # sentinel on llama-spm lets <unk> into JSON strings, as llguidance's own integration does
    [("llama-bpe", "fixed"), ("llama-spm", "fixed"), ("llama-bpe", "sentinel")],
)
def test_fixed_and_sentinel_never_under_constrain_on_any_grammar(name: str, good: str) -> None:
    r = sound(name, variant(good))
    assert (r.errors, r.skipped) == ([], [])
    assert {d.grammar for d in r.diffs if d.n_under} == set()
    assert r.under == 0 and r.walks >= sum(map(len, soundness.SAMPLES.values()))


def test_fixed_on_llama_spm_matches_the_truth_exactly() -> None:
    # the probe fails on SPM, so fixed hands llguidance the truth's table without forcing
    r = sound("llama-spm", "fixed")
    assert (r.under, r.over, r.stop_disagree) == (0, 0, 0)


def test_fixed_on_llama_bpe_narrows_only_where_it_forces() -> None:
    r = sound("llama-bpe", "fixed")
    assert r.over > 0 and r.over == r.over_collapsed


def test_the_walk_records_upstreams_dead_matcher_and_leaves_it() -> None:
    r = sound("llama-spm", "upstream")
    grammar, sample, step, error = r.errors[0]
    assert (grammar, sample, step) == ("literal", grammars.FORCED_LITERAL, 1)
    assert error.startswith("Parser Error: token \"world\" doesn't satisfy the grammar")
    assert not [d for d in r.diffs if (d.grammar, d.sample) == (grammar, sample) and d.step > step]


def test_sentinel_allows_unk_inside_json_strings_on_llama_spm() -> None:
    # llamacpp.py marks CONTROL and <...> USER_DEFINED tokens only: <unk> (UNKNOWN) stays text,
    # and only json_nested has a free string for it
    r = sound("llama-spm", "sentinel")
    assert {t for d in r.diffs for t in d.under} == {0}
    assert {d.grammar for d in r.diffs if d.n_under} == {"json_nested"}
    assert vocab("llama-spm").token_to_piece(0) == b""
    assert bridge("llama-spm", "sentinel").token_bytes[0] == b"<unk>"
