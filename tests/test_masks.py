"""Leak and forced-mask tests (guide 4.4, 5.1, 7.1, 7.2), asserted on bytes, not counts.

Where a count is asserted it is the guide's, or it is set against a computation that does not
go through llguidance: Python's `re` over the bytes llama.cpp gives.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest
from conftest import bridge, variant, vocab

from llgbridge import bridges as B
from llgbridge import grammars, guide
from llgbridge.analyses.forced import compute as forced_mod
from llgbridge.analyses.leak import compute as leak_mod
from llgbridge.inputs import Input


@cache
def leak(name: str, var: str) -> leak_mod.LeakResult:
    return leak_mod.leak_test(bridge(name, var), bridge(name, "truth"), grammars.LEAK_GRAMMAR)


@cache
def forced(name: str, var: str) -> forced_mod.ForcedResult:
    return forced_mod.forced_test(bridge(name, var), grammars.FORCED_LITERAL)


def pieces(name: str, tokens: list[int]) -> list[bytes]:
    return [vocab(name).token_to_piece(t) for t in tokens]


# the byte strings that can start a string of LEAK_GRAMMAR (`/[.a-z]{2,6}/ "!"`), by hand
LEAK_PREFIX = re.compile(rb"[.a-z]{0,6}|[.a-z]{2,6}!")


@pytest.mark.guards("documents bug A: upstream leaks the guide's six pieces on llama-bpe")
def test_upstream_leaks_the_guides_six_pieces_on_llama_bpe() -> None:
    r = leak("llama-bpe", variant("upstream"))
    assert sorted(pieces("llama-bpe", r.with_space)) == sorted(guide.LEAK_BPE_PIECES)
    assert r.illegal == r.with_space


@pytest.mark.guards("bug A: token_bytes from llama_detokenize")
@pytest.mark.parametrize(
    "name, good",
    # llguidance's own integration refuses bert-bge (no EOS)
    [
        (n, g)
        for n in ("llama-bpe", "llama-spm", "gemma-4", "bert-bge")
        for g in ("fixed", "sentinel")
        if (n, g) != ("bert-bge", "sentinel")
    ],
)
def test_fixed_and_sentinel_allow_no_illegal_token(name: str, good: str) -> None:
    r = leak(name, variant(good))
    bad = pieces(name, r.illegal)
    assert bad == [], f"allowed but illegal: {bad[:10]}"


@pytest.mark.parametrize("name", sorted(guide.LEAK))
def test_leak_counts_match_the_guide(name: str) -> None:
    assert (len(leak(name, "upstream").with_space), len(leak(name, "fixed").with_space)) == guide.LEAK[name]


@pytest.mark.parametrize("name", sorted(guide.LEAK))
def test_upstream_leaks_are_what_its_detokenized_bytes_admit(name: str) -> None:
    # Without llguidance: a token is allowed at position 0 exactly when the bytes upstream hands
    # over for it, llama_detokenize's, can start a string of the grammar; it leaks when its real
    # piece has a space. llguidance's trie walk over upstream's table must agree token for token.
    v = vocab(name)
    admitted = {t for t in range(v.n_tokens) if (d := v.detokenize([t])) and LEAK_PREFIX.fullmatch(d)}
    r = leak(name, "upstream")
    assert set(r.allowed) == admitted
    assert set(r.with_space) == {t for t in admitted if b" " in v.token_to_piece(t)}


@pytest.mark.guards("documents bug B: upstream forces ' hello' on llama-spm")
def test_upstream_forces_the_wrong_token_on_llama_spm() -> None:
    r = forced("llama-spm", variant("upstream"))
    assert list(zip(r.allowed, r.pieces)) == [(guide.FORCED_SPM_TOKEN, b" hello")]
    assert r.not_prefix == [guide.FORCED_SPM_TOKEN]


def test_upstream_matcher_dies_on_llama_spm_with_llguidances_message() -> None:
    r = forced("llama-spm", "upstream")
    # the guide quotes the same failure on "quick"; here the literal's second word
    assert r.error.startswith(
        "Parser Error: token \"world\" doesn't satisfy the grammar; forced bytes: got ' '; applying 'w'"
    )
    assert r.output == b" hello world"


def test_fixed_allows_the_guides_prefixes_on_llama_spm() -> None:
    r = forced("llama-spm", "fixed")
    assert sorted(r.pieces) == sorted(guide.FORCED["llama-spm"][1])


@pytest.mark.guards("bug B: tokenize_fn prepends a space on SentencePiece")
@pytest.mark.parametrize("good", ["fixed", "sentinel"])
def test_fixed_and_sentinel_allow_only_prefixes_on_llama_spm(good: str) -> None:
    r = forced("llama-spm", variant(good))
    assert r.pieces and all(grammars.FORCED_LITERAL.encode().startswith(p) for p in r.pieces)
    assert (r.error, r.output) == ("", b"hello world")


@pytest.mark.parametrize("var", ["upstream", "fixed"])
def test_llama_bpe_forces_hello_either_way(var: str) -> None:
    # guide 6: "on llama-bpe, test_forced_mask_bytes reports the same single allowed token (15339
    # "hello") before and after"
    r = forced("llama-bpe", var)
    assert list(zip(r.allowed, r.pieces)) == [(15339, b"hello")]
    assert (r.error, r.output) == ("", b"hello world")


@pytest.mark.slow
def test_one_bridges_error_costs_only_its_row_on_an_all_control_vocab(tmp_path: Path) -> None:
    # issue 24.12: on a vocab whose every token is CONTROL, llguidance refuses every mask
    # ("NoExtensionBias") and sentinel finds no sentinel token; the first error discarded the run.
    # Issue 29.11: the analysis itself now refuses such a vocab in one line (no token has text, so
    # none of its figures could be attributed to a bug); the rows' isolation is checked through the
    # library the notebook calls
    import json

    from helpers import all_control, write_vocab

    from llgbridge import nb, results, run
    from llgbridge.vocab import Vocab

    ctl = write_vocab(tmp_path / "ctl.gguf", all_control)
    res = tmp_path / "results"
    st = run.execute("leak", Input.make("ctl", str(ctl)), {}, out_root=tmp_path / "r", results_dir=res)
    assert (
        st["status"] == "failed" and "no token has text: all 32000 tokens are control or unknown tokens" in st["error"]
    ), st
    v = Vocab(ctl, "ctl")
    built, build_errors = nb.make_bridges(v, ["upstream", "fixed", "sentinel"])
    got, mask_errors = leak_mod.leak_tests(built, B.make_bridge(v, "truth"), grammars.LEAK_GRAMMAR)
    r = {
        "status": "ok",
        "notebook": "leak",
        "vocab": "ctl",
        **leak_mod.leak_payload(v, grammars.LEAK_GRAMMAR, got, build_errors, mask_errors),
    }
    (res / "leak").mkdir(parents=True, exist_ok=True)
    (res / "leak" / "ctl.json").write_text(json.dumps(r))
    assert results.why_unusable("leak", "ctl", r) == ""
    rows = {x["bridge"]: x for x in r["rows"]}
    assert sorted(rows) == ["fixed", "sentinel", "upstream"]
    for b in ("upstream", "fixed"):
        assert (
            rows[b]["error"]
            == "its mask failed: no token of this vocab can continue the grammar (llguidance stopped: NoExtensionBias)"
        )
    assert rows["sentinel"]["build_error"] == "sentinel bridge: could not find a good sentinel token in the range 1..32"
    assert all("\n" not in str(v) for x in r["rows"] for v in x.values())
    from llgbridge import report

    # llama-spm's leak result computed here as its notebook computes it (a fresh clone has no data/results);
    # a result that records no provenance stands (results._stale)
    grammar = grammars.LEAK_GRAMMAR
    leaks = [
        leak_mod.leak_test(bridge("llama-spm", b), bridge("llama-spm", "truth"), grammar) for b in ("upstream", "fixed")
    ]
    spm = {
        "status": "ok",
        "notebook": "leak",
        "vocab": "llama-spm",
        **leak_mod.leak_payload(vocab("llama-spm"), grammar, leaks, {}),
    }
    (res / "leak" / "llama-spm.json").write_text(json.dumps(spm))
    sec = report.leak_section(res)  # the report takes the rows as they are, beside another vocab's
    assert sec is not None
    assert sorted(sec.raw[0].df[sec.raw[0].df.vocab == "ctl"].bridge) == ["fixed", "sentinel", "upstream"]
