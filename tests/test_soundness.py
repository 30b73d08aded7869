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
from llgbridge.analyses.native.trace import MIXED_QUANTIFIERS  # llama.cpp's own "mixed quantifiers" test grammar


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
    assert error.startswith('Parser Error: token "world" doesn\'t satisfy the grammar')
    assert not [d for d in r.diffs if (d.grammar, d.sample) == (grammar, sample) and d.step > step]


def test_sentinel_allows_unk_inside_json_strings_on_llama_spm() -> None:
    # llamacpp.py marks CONTROL and <...> USER_DEFINED tokens only: <unk> (UNKNOWN) stays text,
    # and only json_nested has a free string for it
    r = sound("llama-spm", "sentinel")
    assert {t for d in r.diffs for t in d.under} == {0}
    assert {d.grammar for d in r.diffs if d.n_under} == {"json_nested"}
    assert vocab("llama-spm").token_to_piece(0) == b""
    assert bridge("llama-spm", "sentinel").token_bytes[0] == b"<unk>"


# -- bug D: an llguidance error mid-walk, typed (MaskError), and what the sampler does next -------------


@pytest.mark.guards("bug D")
def test_a_resource_limit_mid_walk_is_recorded_with_the_limit_and_what_follows() -> None:
    """On gemma-4 the mask after `bry` exceeds llguidance's step_max_items (50000 by default,
    LlgParserLimits): the truth stops there too, so the walk is skipped, and each bridge's own mask
    at that step fails the same way. The PR's sampler then drops the grammar (all 262144 tokens);
    failing closed allows the three end-of-generation tokens (<eos>, <|tool_response>, <turn|>)."""
    v = vocab("gemma-4")
    fx, fc = bridge("gemma-4", "fixed"), bridge("gemma-4", variant("failclosed"))
    sound = soundness.soundness(
        bridge("gemma-4", "truth"), [fx, fc], {"mixed": MIXED_QUANTIFIERS}, {"mixed": ("bryyyy",)}, walks=0
    )
    rows = soundness.mask_error_rows(sound)
    frame = soundness.bug_d_frame(rows)
    assert sorted(frame.bridge) == sorted(["truth", "fixed", fc.name])
    assert set(frame.step) == {1} and set(frame["at"]) == {"mask"} and set(frame.limit) == {50000}
    assert set(frame.limit_of) == {"mask"} and all(
        frame.error.str.startswith("parser error: Too many items (limit 50000; mask)")
    )
    assert (frame["items"] > 50000).all() and (
        frame.over_limit == frame["items"] - 50000
    ).all()  # llguidance's all_items
    by = frame.set_index("bridge")
    assert (by.at["fixed", "then"], by.at["fixed", "then_allowed"]) == ("grammar dropped", v.n_tokens)
    assert (by.at["failclosed", "then"], by.at["failclosed", "then_allowed"]) == ("end of generation only", 3)
    assert (
        sound["fixed"].row()["errors"] == 0
    )  # the walk was skipped (the truth stopped): the old counts are as they were


def test_an_error_that_names_no_limit_is_kept_but_is_not_bug_d() -> None:
    """Upstream on llama-spm: its forced ' hello' is not what the literal needs (guide 5.1): an
    error mid-walk at consume, with no limit, so bug_d_frame leaves it out unless asked."""
    sound = soundness.soundness(
        bridge("llama-spm", "truth"),
        [bridge("llama-spm", "upstream")],
        {"literal": soundness.BATTERY["literal"]},
        {"literal": soundness.SAMPLES["literal"]},
        walks=0,
    )
    rows = soundness.mask_error_rows(sound)
    assert [(r["bridge"], r["step"], r["at"], r["limit"]) for r in rows] == [("upstream", 1, "consume", None)]
    assert "doesn't satisfy the grammar" in rows[0]["error"] and rows[0]["then"] == "grammar dropped"
    assert soundness.bug_d_frame(rows).empty and len(soundness.bug_d_frame(rows, limits_only=False)) == 1
