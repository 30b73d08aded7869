"""Every bridge builds on every fixture (or refuses it as llguidance does); token tables hold the
bytes the guide says; the matcher keeps its callback alive; bad names and grammars are one line."""

from __future__ import annotations

import gc

import pytest
from conftest import ALL_VOCABS, bridge, variant, vocab

from llgbridge import bridges, candidates, guide
from llgbridge.analyses.native.trace import MIXED_QUANTIFIERS  # llama.cpp's own "mixed quantifiers" test grammar
from llgbridge.errors import InputError, LlgError
from llgbridge.grammars import literal_grammar
from llgbridge.llg import mask_bits
from llgbridge.probe import PROBES, probe_tokenize_exact


@pytest.mark.parametrize("name", ALL_VOCABS)
@pytest.mark.parametrize("var", bridges.COMPARED)
def test_every_variant_builds_on_every_fixture(name: str, var: str) -> None:
    if var == "sentinel" and name in ("bert-bge", "nomic-bert-moe"):
        # llguidance's own llama.cpp integration refuses these (no EOS / no usable sentinel)
        with pytest.raises(InputError, match=f"ggml-vocab-{name}.gguf: "):
            bridges.make_bridge(vocab(name), var)
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
    for var in bridges.COMPARED:
        assert bridge("llama-spm", var).token_bytes[v.bos] == b"\xff<s>"


def test_upstream_always_forces() -> None:
    b = bridge("llama-spm", "upstream")
    assert (b.greedy, b.forcing) == (False, True)


def test_unknown_bridge_is_a_one_line_error() -> None:
    with pytest.raises(
        InputError,
        match=rf"^bridge 'nope': unknown bridge; choose one of upstream, fixed, sentinel, "
        rf"{', '.join(candidates.NAMES)}, truth$",
    ):
        bridges.make_bridge(vocab("llama-spm"), "nope")


def test_tokenize_callback_outlives_python_references() -> None:
    # llguidance calls tokenize_fn while computing a forced mask; the matcher must keep
    # the callback (and the vocab) alive after every other reference is gone.
    m = bridges.make_bridge(vocab("llama-bpe"), "upstream").new_matcher('start: "hello world"')
    gc.collect()
    assert m.allowed() == [15339]
    assert m.owner.tokenize(b"hello world") == vocab("llama-bpe").tokenize(b"hello world")


def test_bad_grammar_is_a_one_line_error() -> None:
    with pytest.raises(InputError, match=r"^lark grammar 'start: /\[unclosed/': llguidance rejected it") as e:
        bridge("llama-bpe", "fixed").new_matcher("start: /[unclosed/")
    assert "\n" not in str(e.value)


# -- beyond the PR: the candidate patches' ports (patches/candidates/; the compiled side is test_native) ---
def _follow(b: bridges.Bridge, grammar: str, steps: int = 16) -> list[list[int]]:
    """The allowed ids per step, accepting the lowest one that is not EOS/EOT (the harness's "follow")."""
    v, m, out = b.vocab, b.new_matcher(grammar), []
    for _ in range(steps):
        allowed = m.allowed()
        out.append(allowed)
        nxt = next((t for t in allowed if t not in (v.eos, v.eot)), None)
        if nxt is None:
            break
        m.consume(nxt)
    return out


SPECIAL_LITERAL = "say <|eot_id|> now"  # the hand-checked bug C example on llama-bpe


def test_bug_c_the_pr_port_forces_the_control_token_for_its_text() -> None:
    """The issue's walk, as the compiled PR sampler takes it: `say` (37890), `' '` (220), then only
    128009, the <|eot_id|> control token, where the grammar asks for its text (not `guards`: the
    shipped bridge does the same, so a swap cannot tell them apart)."""
    steps = _follow(bridge("llama-bpe", "fixed"), literal_grammar(SPECIAL_LITERAL))
    assert steps[:3] == [[37890], [220], [128009]]
    assert vocab("llama-bpe").token_to_piece(128009, special=True) == b"<|eot_id|>"


@pytest.mark.guards("bug C")
def test_the_nospecial_port_spells_the_special_text_out() -> None:
    """With parse_special = false the token after `say` is `' <|'` (83739), and the forced tokens
    spell the literal byte for byte, as llguidance's own integration does; the PR's port forces
    128009 instead."""
    v = vocab("llama-bpe")
    b = bridge("llama-bpe", variant("nospecial"))
    steps = _follow(b, literal_grammar(SPECIAL_LITERAL))
    assert steps[1] == [83739] and v.token_to_piece(83739) == b" <|"
    assert v.real_bytes([s[0] for s in steps if s[0] not in (v.eos, v.eot)]) == SPECIAL_LITERAL.encode()
    toks = b.tokenize_fn(b"a<|eot_id|>b")  # the callback itself: the text's pieces, no control token
    assert 128009 not in toks and v.real_bytes(toks) == b"a<|eot_id|>b"


def test_the_fourth_probe_calls_llama_bpe_inexact_under_parse_special() -> None:
    """Candidate 0004's fourth probe is `a<|eot_id|>b` on llama-bpe; with parse_special = true (the
    PR's tokenize_fn) it comes back as `ab` (64, 128009, 65: the control token has no piece), so the
    PR's probe with it would have called llama-bpe inexact; with parse_special = false it round-trips,
    and the candidate keeps byte forcing."""
    v = vocab("llama-bpe")
    probe = bridges.special_probe(v)
    assert probe == b"a<|eot_id|>b"
    said = probe_tokenize_exact(v, (*PROBES, probe), parse_special=True)
    assert (said.exact, said.failed_probe, said.got, said.tokens) == (False, probe, b"ab", (64, 128009, 65))
    assert probe_tokenize_exact(v, (*PROBES, probe), parse_special=False).exact
    assert bridge("llama-bpe", "nospecial").forcing


GEMMA4_EOG = {1: b"<eos>", 50: b"<|tool_response>", 106: b"<turn|>"}  # llama_vocab_is_eog on gemma-4, by hand


@pytest.mark.guards("bug D")
def test_the_failclosed_port_allows_only_the_end_after_too_many_items() -> None:
    """On gemma-4 the mask after `bry` exceeds step_max_items ("Too many items (limit 50000; mask)").
    The PR's sampler then drops the grammar (all 262144 tokens); failing closed allows only the
    end-of-generation tokens."""
    v = vocab("gemma-4")
    b = bridge("gemma-4", variant("failclosed"))
    m = b.new_matcher(MIXED_QUANTIFIERS)
    assert len(mask_bits(m.mask(), v.n_tokens).nonzero()[0]) > 0
    m.consume(v.tokenize(b"bryyyy", parse_special=False)[0])
    with pytest.raises(LlgError, match=r"Too many items \(limit 50000; mask\)"):
        m.mask()
    assert b.after_mask_error().tolist() == sorted(GEMMA4_EOG)
    assert [v.token_to_piece(t, special=True) for t in sorted(GEMMA4_EOG)] == list(GEMMA4_EOG.values())


def test_the_pr_port_drops_the_grammar_on_a_mask_error() -> None:
    b = bridge("gemma-4", "fixed")
    assert b.after_mask_error().tolist() == list(range(vocab("gemma-4").n_tokens))


def test_each_vocab_gets_a_nospecial_bridge_of_its_own() -> None:
    """A leftover `@lru_cache(maxsize=1)` decorated the class itself: `make_bridge(v, "nospecial")` returned
    one shared instance, `isinstance(x, NoSpecial)` raised TypeError, and it kept the last vocab alive."""
    from llgbridge import bridges as B

    a, b = B.make_bridge(vocab("llama-bpe"), "nospecial"), B.make_bridge(vocab("llama-spm"), "nospecial")
    assert isinstance(a, B.NoSpecial) and isinstance(b, B.NoSpecial) and a is not b
    assert (a.vocab.name, b.vocab.name) == ("llama-bpe", "llama-spm")


def test_the_candidate_registry_matches_the_patches_the_ports_and_the_builds() -> None:
    """A candidate is one patch, a port of the same name and the builds under that name: a patch
    with no entry is never built, and an entry with no port of its own is compared with nothing."""
    from llgbridge.analyses.native import builder
    from llgbridge.analyses.native.compute import harness_samplers
    from llgbridge.analyses.server import llama_server

    assert sorted(p.name for p in builder.CANDIDATE_PATCHES.glob("*.patch")) == sorted(
        c.patch for c in candidates.CANDIDATES
    )
    ports = [bridges.bridge_class(c.name) for c in candidates.CANDIDATES]
    assert [getattr(p, "name", None) for p in ports] == list(candidates.NAMES)
    assert len(set(ports)) == len(ports) and not set(ports) & {bridges.bridge_class(n) for n in bridges.COMPARED}
    for c in candidates.NAMES:
        assert (builder.bin_dir(builder.LLG_PINNED) / f"test-pr-{c}").is_file(), c
        assert c in harness_samplers(builder.LLG_PINNED), c
        assert llama_server.binary(c, builder.LLG_PINNED).is_file(), c
