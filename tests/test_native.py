"""The compiled code (guide 7, 8 unit level): llama.cpp's own test and the port against the real sampler.

Expectations come from the guide (its tables 7.1 and 7.2), from llguidance's header (the
struct layouts), and from the pinned sdist (the patches apply to it). The binaries are built by
`make test` (`make native`); where they cannot be built (no C++ compiler, no `patch`), every
test here is skipped with that one-line reason.
"""

from __future__ import annotations

import ctypes
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
from conftest import bridge, variant, vocab

from llgbridge import guide, llg, native
from llgbridge.grammars import FORCED_LITERAL, LEAK_GRAMMAR, literal_grammar

_why = native.unavailable()
pytestmark = pytest.mark.skipif(_why is not None, reason=f"native parts not built: {_why}")


@pytest.mark.guards("bug A and bug B")
@pytest.mark.parametrize("name", ["llama-bpe", "llama-spm"])
def test_pr_test_fails_on_the_shipped_sampler_as_the_guide_says(name: str) -> None:
    """Guide 7.1: exit 134 with 6 (llama-bpe) or 6136 (llama-spm) spaced tokens allowed."""
    run = native.run_test("pr", variant("upstream"), vocab(name).path)
    (code, bad), _ = guide.UNIT[name]
    assert (run.exit_code, run.space_bad) == (code, bad)
    spaced = [vocab(name).token_to_piece(t) for t in run.forced_tokens]
    if name == "llama-spm":  # guide 7.2: the one forced token, and its wrong bytes
        assert run.forced_tokens == (guide.FORCED_SPM_TOKEN,) and spaced == [b" hello"]


@pytest.mark.guards("bug A and bug B")
@pytest.mark.parametrize("name", ["llama-bpe", "llama-spm"])
def test_pr_test_passes_on_the_fixed_sampler(name: str) -> None:
    """Guide 7.1, 7.2: exit 0; the forced literal's allowed pieces are the guide's, by bytes."""
    run = native.run_test("pr", variant("fixed"), vocab(name).path)
    _, (code, bad) = guide.UNIT[name]
    assert (run.exit_code, run.space_bad, run.forced_bad) == (code, bad, 0)
    pieces = tuple(vocab(name).token_to_piece(t) for t in run.forced_tokens)
    assert sorted(pieces) == sorted(guide.FORCED[name][1])  # the guide lists them by length
    # guide 7.3: the string tests run on the byte-exact vocab and are skipped on SentencePiece
    assert run.string_tests == ("skipped" if name == "llama-spm" else "ran")


@pytest.mark.guards("bug B")
def test_shipped_test_string_failure_on_spm_is_the_prefix_space() -> None:
    """Guide 7.3: the shipped string tests fail on llama-spm with both samplers, so they cannot
    tell the fix from the bug there; the PR's guard is what makes its suite pass."""
    shipped = native.run_test("shipped", "fixed", vocab("llama-spm").path)
    pr = native.run_test("pr", variant("fixed"), vocab("llama-spm").path)
    assert shipped.exit_code == 134 and "failed to match" in shipped.failure
    assert pr.exit_code == 0


@pytest.mark.guards("bug A and bug B")
@pytest.mark.parametrize("name", ["llama-bpe", "llama-spm"])
@pytest.mark.parametrize("sampler", ["upstream", "fixed"])
def test_port_equals_the_compiled_sampler_on_leak_and_forced(name: str, sampler: str) -> None:
    """Every allowed set along the leak and forced walks, and the error where the matcher dies,
    are the same in the Python port and in the compiled `llama_sampler_init_llg`."""
    jobs = [native.Job("leak", LEAK_GRAMMAR, ()), native.Job("forced", literal_grammar(FORCED_LITERAL), None)]
    traces = native.harness(sampler, vocab(name).path, jobs)
    d = native.differential(bridge(name, variant(sampler)), jobs, traces)
    assert d.cells > len(jobs) and d.differences == []


def test_forced_trace_on_spm_dies_where_the_guide_says() -> None:
    """Guide 5.1: upstream's compiled sampler on llama-spm allows only 22172 (' hello'), then
    llguidance errors and the sampler lets everything through."""
    v = vocab("llama-spm")
    t = native.harness("upstream", v.path, [native.Job("forced", literal_grammar(FORCED_LITERAL), None)])["forced"]
    assert t.allowed[0].tolist() == [guide.FORCED_SPM_TOKEN]
    assert "doesn't satisfy the grammar" in t.error and t.error_step is not None
    assert len(t.allowed[t.error_step]) == v.n_tokens


def test_patches_apply_cleanly_to_the_pinned_sdist() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        native._extract_sources(Path(tmp))
        native.apply_patches(Path(tmp), dry_run=True)
        native.apply_patches(Path(tmp))
        text = (Path(tmp) / "common" / "llguidance.cpp").read_text()
    assert "llama_detokenize(vocab" not in text and "llama_sampler_llg_tokenize_is_exact(vocab)" in text


def test_header_layouts_equal_the_ctypes_binding() -> None:
    """native/llguidance.h and llg.py declare the same structs: offsets and sizes agree."""
    out = subprocess.run([str(native.BIN / "harness-upstream"), "--layout"], capture_output=True, text=True, check=True).stdout
    structs = {"LlgParserLimits": llg.LlgParserLimits, "LlgConstraintInit": llg.LlgConstraintInit, "LlgTokenizerInit": llg.LlgTokenizerInit}
    seen = 0
    for line in out.splitlines():
        word, name, *rest = line.split()
        cls = structs[name]
        if word == "@sizeof":
            assert int(rest[0]) == ctypes.sizeof(cls), name
        else:
            field, offset, size = rest[0], int(rest[1]), int(rest[2])
            desc = getattr(cls, field)
            assert (offset, size) == (desc.offset, desc.size), f"{name}.{field}"
            seen += 1
    assert seen == sum(len(c._fields_) for c in structs.values())


def test_a_harness_abort_is_one_line() -> None:
    """A file llama.cpp cannot load ends the harness; the caller gets one line, not a crash."""
    with tempfile.NamedTemporaryFile(suffix=".gguf") as f:
        f.write(b"GGUF" + bytes(20))
        f.flush()
        with pytest.raises(RuntimeError, match="harness-fixed"):
            native.harness("fixed", Path(f.name), [native.Job("leak", LEAK_GRAMMAR, ())])


def test_ranges_round_trip() -> None:
    ids = np.array([0, 1, 2, 5, 7, 8])
    assert native._parse_ranges("0-2,5,7-8").tolist() == ids.tolist()
    assert native._parse_ranges(".").tolist() == []


# -- beyond the PR: bug C, bug D and the candidate patches (patches/candidates/) ----------------------
SPECIAL_JOB = native.Job("special", literal_grammar("say <|eot_id|> now"), None, 64)
PIN = native.LLG_PINNED


def _cand_built(name: str) -> None:
    if not (native.bin_dir(PIN) / f"harness-{name}").exists():
        pytest.skip(f"candidate {name} not built against llguidance {PIN}")


def test_bug_c_the_pr_sampler_forces_the_control_token_for_its_text() -> None:
    """The issue's hand-checked walk on llama-bpe: `say` (37890), `' '` (220), then only 128009,
    the <|eot_id|> control token, where the grammar asks for its text; a decoder ends the turn there."""
    t = native.harness("fixed", vocab("llama-bpe").path, [SPECIAL_JOB], llg=PIN)["special"]
    assert [a.tolist() for a in t.allowed[:3]] == [[37890], [220], [128009]]


@pytest.mark.guards("bug C")
def test_the_nospecial_candidate_spells_the_text_out() -> None:
    """With parse_special = false the forced tokens after `say` are the text's own pieces (`' <|'`,
    `e`, `ot`, ...), and the walk spells the whole literal."""
    s = variant("nospecial")
    _cand_built(s)
    t = native.harness(s, vocab("llama-bpe").path, [SPECIAL_JOB], llg=PIN)["special"]
    v = vocab("llama-bpe")
    assert t.allowed[1].tolist() == [83739] and v.token_to_piece(83739) == b" <|"
    assert v.real_bytes([x for x in t.tokens if x >= 0]) == b"say <|eot_id|> now"


def test_the_fourth_probe_calls_llama_bpe_inexact_under_parse_special() -> None:
    """The candidate's fourth probe, `a` + the end-of-turn token's text + `b`: tokenized with
    parse_special = true as the PR's tokenize_fn does, it does not come back (a control token has no
    piece), so the PR's probe with it would have noticed; with parse_special = false it does."""
    v = vocab("llama-bpe")
    probe = b"a" + native.special_text(v).encode() + b"b"
    assert v.real_bytes(v.tokenize(probe, parse_special=True)) != probe
    assert v.real_bytes(v.tokenize(probe, parse_special=False)) == probe


@pytest.mark.guards("bug D")
def test_the_failclosed_candidate_allows_only_the_end_after_too_many_items() -> None:
    """llama.cpp's own "mixed quantifiers" test on gemma-4: its passing string `bryyyy` makes a mask
    exceed step_max_items at step 1 ("Too many items"). The PR's sampler then drops the grammar
    and allows all 262144 tokens; failing closed allows only the end-of-generation tokens."""
    s = variant("failclosed")
    _cand_built(s)
    v = vocab("gemma-4")
    grammar = "start: cons+ vowel* cons? (vowel cons)*\nvowel: /[aeiouy]/\ncons: /[bcdfghjklmnpqrstvwxyz]/\n"
    job = native.Job("mixed", grammar, tuple(v.tokenize(b"bryyyy", parse_special=False)))
    t = native.harness(s, v.path, [job], llg=PIN)["mixed"]
    assert t.error_step == 1 and "Too many items" in t.error
    import llama_cpp

    eog = sorted(x for x in range(v.n_tokens) if llama_cpp.llama_vocab_is_eog(v.llama_vocab, x))
    assert t.allowed[1].tolist() == eog
