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
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from conftest import bridge, variant, vocab

from llgbridge import guide, llg
from llgbridge.analyses.native import compute as native
from llgbridge.analyses.native.trace import MIXED_QUANTIFIERS
from llgbridge.grammars import FORCED_LITERAL, LEAK_GRAMMAR, literal_grammar

_why = native.unavailable()
pytestmark = pytest.mark.skipif(_why is not None, reason=f"native parts not built: {_why}")
# llama.cpp's test in its own binary is a function of (test, sampler, vocab): the tests below that
# read the same run (the guide's exits, and the harness's children against each binary) share it
run_test = cache(native.run_test)


@pytest.mark.guards("bug A and bug B")
@pytest.mark.parametrize("name", ["llama-bpe", "llama-spm"])
def test_pr_test_fails_on_the_shipped_sampler_as_the_guide_says(name: str) -> None:
    """Guide 7.1: exit 134 with 6 (llama-bpe) or 6136 (llama-spm) spaced tokens allowed."""
    run = run_test("pr", variant("upstream"), vocab(name).path)
    (code, bad), _ = guide.UNIT[name]
    assert (run.exit_code, run.space_bad) == (code, bad)
    spaced = [vocab(name).token_to_piece(t) for t in run.forced_tokens]
    if name == "llama-spm":  # guide 7.2: the one forced token, and its wrong bytes
        assert run.forced_tokens == (guide.FORCED_SPM_TOKEN,) and spaced == [b" hello"]


@pytest.mark.guards("bug A and bug B")
@pytest.mark.parametrize("name", ["llama-bpe", "llama-spm"])
def test_pr_test_passes_on_the_fixed_sampler(name: str) -> None:
    """Guide 7.1, 7.2: exit 0; the forced literal's allowed pieces are the guide's, by bytes."""
    run = run_test("pr", variant("fixed"), vocab(name).path)
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
    shipped = run_test("shipped", "fixed", vocab("llama-spm").path)
    pr = run_test("pr", variant("fixed"), vocab("llama-spm").path)
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
        native.extract_sources(Path(tmp))
        native.apply_patches(Path(tmp), dry_run=True)
        native.apply_patches(Path(tmp))
        text = (Path(tmp) / "common" / "llguidance.cpp").read_text()
    assert "llama_detokenize(vocab" not in text and "llama_sampler_llg_tokenize_is_exact(vocab)" in text


def test_header_layouts_equal_the_ctypes_binding() -> None:
    """native/llguidance.h and llg.py declare the same structs: offsets and sizes agree."""
    out = subprocess.run([str(native.BIN / "harness"), "--layout"], capture_output=True, text=True, check=True).stdout
    structs = {
        "LlgParserLimits": llg.LlgParserLimits,
        "LlgConstraintInit": llg.LlgConstraintInit,
        "LlgTokenizerInit": llg.LlgTokenizerInit,
    }
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


@pytest.mark.parametrize("name", ["llama-bpe", "llama-spm"])
def test_one_harness_process_gives_each_sampler_its_own_runs_traces(name: str) -> None:
    """Every sampler linked into one harness, each job walked in one shared process: the same
    allowed ids, accepted tokens, errors and sampler log, job by job, as each sampler's own run
    (the fixed sampler's "not byte exact" line in its own first job, its tokenizer its own)."""
    v = vocab(name)
    jobs = native.jobs_for(bridge(name, "truth"), FORCED_LITERAL, LEAK_GRAMMAR, walks=0)
    samplers = native.harness_samplers()
    assert samplers[:2] == native.SAMPLERS and set(native.PATCH_OF) <= set(samplers)
    shared = native.harness_each({s: jobs for s in samplers}, v.path)
    for s in samplers:
        own = native.harness(s, v.path, jobs)
        got = shared[s]
        assert not isinstance(got, Exception), got
        for j in jobs:
            a, b = own[j.id], got[j.id]
            assert [x.tobytes() for x in a.allowed] == [x.tobytes() for x in b.allowed], (s, j.id)
            assert (a.tokens, a.error, a.error_step, a.log) == (b.tokens, b.error, b.error_step, b.log), (s, j.id)
    # guide 7.1, 5.1: the shipped sampler allows spaced tokens for the leak grammar on llama-bpe and
    # dies along the forced literal on llama-spm, the fixed one does neither, so a harness that ran
    # one sampler for every `sampler` line would show here
    job = {"llama-bpe": "leak", "llama-spm": "forced"}[name]
    up, fixed = shared["upstream"][job], shared["fixed"][job]  # type: ignore[index]
    assert [x.tobytes() for x in up.allowed] != [x.tobytes() for x in fixed.allowed]


@pytest.mark.parametrize("name", ["llama-bpe", "llama-spm"])
def test_the_harness_runs_llamas_tests_as_their_own_binaries_do(name: str) -> None:
    """llama.cpp's tests in the harness's children, each after the harness walked its sampler's
    jobs (the tokenizer built and cached there), read the same as each test's own binary: exit,
    counts, forced tokens, string tests, failure, llg error, assertion. Guide 7.1: the PR's test
    aborts on the shipped sampler, so a child's abort ends that test only and the next one runs."""
    v = vocab(name)
    tests = {s: ("shipped", "pr") for s in native.SAMPLERS}
    served = native.harness_serve({s: [native.Job("leak", LEAK_GRAMMAR, ())] for s in native.SAMPLERS}, v.path, tests)
    assert set(served.test_seconds) == set(served.tests) == {(t, s) for s in native.SAMPLERS for t in tests[s]}
    for (t, s), run in served.tests.items():
        assert run == run_test(t, s, v.path), (t, s)
    (code, bad), (fixed_code, _) = guide.UNIT[name]
    up, fixed = served.tests["pr", "upstream"], served.tests["pr", "fixed"]
    assert (up.exit_code, up.space_bad, fixed.exit_code) == (code, bad, fixed_code)


def test_a_sampler_that_fails_in_the_shared_harness_gets_its_own_runs_error() -> None:
    """A file llama.cpp cannot load ends the shared process before any sampler: each sampler then
    runs alone and gets its own one-line error, naming it."""
    with tempfile.NamedTemporaryFile(suffix=".gguf") as f:
        f.write(b"GGUF" + bytes(20))
        f.flush()
        got = native.harness_each({s: [native.Job("leak", LEAK_GRAMMAR, ())] for s in native.SAMPLERS}, Path(f.name))
    for s in native.SAMPLERS:
        assert isinstance(got[s], RuntimeError) and str(got[s]).startswith(f"harness-{s}"), got[s]


def test_ranges_round_trip() -> None:
    ids = np.array([0, 1, 2, 5, 7, 8])
    assert native.parse_ranges("0-2,5,7-8").tolist() == ids.tolist()
    assert native.parse_ranges(".").tolist() == []


# -- beyond the PR: bug C, bug D and the candidate patches (patches/candidates/) ----------------------
SPECIAL_JOB = native.Job("special", literal_grammar("say <|eot_id|> now"), None, 64)
PIN = native.LLG_PINNED


def _cand_built(name: str) -> None:
    if name not in native.harness_samplers(PIN):
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
    job = native.Job("mixed", MIXED_QUANTIFIERS, tuple(v.tokenize(b"bryyyy", parse_special=False)))
    t = native.harness(s, v.path, [job], llg=PIN)["mixed"]
    assert t.error_step == 1 and "Too many items" in t.error
    import llama_cpp

    eog = sorted(x for x in range(v.n_tokens) if llama_cpp.llama_vocab_is_eog(v.llama_vocab, x))
    assert t.allowed[1].tolist() == eog


@pytest.mark.guards("bug C and bug D")
@pytest.mark.parametrize(
    "name, sampler", [("llama-bpe", "nospecial"), ("gemma-4", "nospecial"), ("gemma-4", "failclosed")]
)
def test_each_candidates_port_equals_its_compiled_sampler(name: str, sampler: str) -> None:
    """Bug C's literal and bug D's grammar (llama.cpp's own "mixed quantifiers"), through each
    candidate's compiled sampler and its port (bridges.NoSpecial, FailClosed): every allowed set, the
    error and what the sampler allows at the failed step (the end of generation, failing closed)."""
    v = vocab(name)
    jobs = [
        j
        for j in native.jobs_for(bridge(name, "truth"), FORCED_LITERAL, LEAK_GRAMMAR, walks=0)
        if j.id in ("special", "mixed")
    ]
    assert [j.id for j in jobs] == ["special", "mixed"]
    traces = native.harness(sampler, v.path, jobs)
    if sampler == "failclosed":
        assert traces["mixed"].error_step == 1 and len(traces["mixed"].allowed[1]) < v.n_tokens
    d = native.differential(bridge(name, variant(sampler)), jobs, traces)
    assert d.cells > len(jobs) and d.differences == []


@pytest.mark.guards("bug B: the PR gives byte forcing up on SentencePiece")
def test_the_ownbridge_candidate_forces_the_literal_on_llama_spm_and_passes_the_prs_test() -> None:
    """llguidance's own bridge in the C++: behind the sentinel byte the forced literal's first mask
    is its one canonical token, `hello` (12199), where the PR's greedy fallback allows six prefixes."""
    s = variant("ownbridge")
    _cand_built(s)
    run = run_test("pr", s, vocab("llama-spm").path)
    assert (run.exit_code, run.space_bad, run.forced_bad) == (0, 0, 0)
    assert [vocab("llama-spm").token_to_piece(t) for t in run.forced_tokens] == [b"hello"]


@pytest.mark.parametrize("name", ["llama-spm", "llama-bpe", "nomic-bert-moe"])
def test_the_ownbridge_port_equals_its_compiled_sampler(name: str) -> None:
    """The leak grammar, the forced literal, bug C's literal and bug D's grammar through the compiled
    candidate and its port (bridges.OwnBridge): behind a sentinel on llama-spm, llama_tokenize as it is
    on llama-bpe, the greedy fallback on nomic-bert-moe (no sentinel: the C++ logs "not byte exact")."""
    _cand_built("ownbridge")
    v = vocab(name)
    jobs = native.jobs_for(bridge(name, "truth"), FORCED_LITERAL, LEAK_GRAMMAR, walks=0)
    traces = native.harness("ownbridge", v.path, jobs)
    d = native.differential(bridge(name, "ownbridge"), jobs, traces)
    assert d.cells > len(jobs) and d.differences == []
    assert d.greedy_cpp == (name == "nomic-bert-moe")


# -- why a native program died: one stable line (issue 24, 17) -----------------------------------------
def _dup_vocab(tmp_path: Path) -> Path:
    """A vocab with a duplicate token, which llama.cpp's loader stops on with a GGML_ASSERT."""
    from gguf import Keys
    from helpers import write_vocab as _write_vocab

    return _write_vocab(
        tmp_path / "dup.gguf", lambda k, v: v[:300] + [v[301]] + v[301:] if k == Keys.Tokenizer.LIST else v
    )


def test_a_harness_abort_names_the_assert_not_the_debugger(tmp_path: Path) -> None:
    """ggml's abort handler runs gdb, whose last line is `[Inferior 1 (process N) detached]`: the
    cause recorded is llama.cpp's GGML_ASSERT line, without directories, the same on every run."""
    dup = _dup_vocab(tmp_path)
    said = []
    for _ in range(2):
        with pytest.raises(RuntimeError) as e:
            native.harness("fixed", dup, [native.Job("leak", LEAK_GRAMMAR, ())])
        said.append(str(e.value))
    why = "llama-vocab.cpp:2544: GGML_ASSERT(id_to_token.size() == token_to_id.size()) failed"
    assert said[0] == said[1] == f"harness-fixed exited 134: {why}"
    run = native.run_test("pr", "fixed", dup)  # llama.cpp's own test binary, the same abort
    assert (run.exit_code, run.failure) == (134, why)


def _harness_under(limit_kb: int, vocab_path: Path) -> tuple[str, int]:
    import resource

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit_kb * 1024, limit_kb * 1024))

    r = subprocess.run(
        [str(native.BIN / "harness"), str(vocab_path)],
        input=("sampler fixed\n" + native.Job("leak", LEAK_GRAMMAR, ()).line()).encode(),
        capture_output=True,
        timeout=120,
        preexec_fn=cap,
    )
    return r.stdout.decode("utf-8", "replace") + r.stderr.decode(
        "utf-8", "replace"
    ), r.returncode if r.returncode >= 0 else 128 - r.returncode


@pytest.mark.parametrize(
    "limit_kb, says",
    [
        (100_000, "out of memory: llama_model_load: error loading model"),  # C++ std::bad_alloc in the loader
        (200_000, "out of memory: memory allocation of "),  # llguidance (Rust) aborts on a failed allocation
    ],
)
def test_a_memory_failure_is_named_out_of_memory(limit_kb: int, says: str) -> None:
    """Under an address-space limit (`ulimit -v`) the harness fails in llama.cpp's loader (C++
    bad_alloc) or in llguidance (Rust's allocation abort): the cause says out of memory, not a crash."""
    out, code = _harness_under(limit_kb, vocab("gemma-4").path)
    assert native.crash_cause(out, code).startswith(says), out[-500:]


def test_an_uncaught_exception_keeps_its_type_and_what() -> None:
    """libstdc++'s terminate handler writes the type, then `what():` on the next line (cut off at the
    quote when the streams interleave); the cause keeps both, addresses and pids taken out."""
    full = (
        "terminate called after throwing an instance of 'std::out_of_range'\n  what():  vector::_M_range_check: __n "
        "(which is 5) >= this->size() (which is 3)\n[Inferior 1 (process 6572) detached]\n"
    )
    assert (
        native.crash_cause(full, 134)
        == "uncaught std::out_of_range: vector::_M_range_check: __n (which is 5) >= this->size() (which is 3)"
    )
    cut = "terminate called after throwing an instance of '\nllg error at 0x7ffd1234abcd\n  what():  bad grammar\n"
    assert native.crash_cause(cut, 134) == "uncaught exception: bad grammar"
    assert native.crash_cause("[Inferior 1 (process 6572) detached]\n", 139) == "segmentation fault (SIGSEGV)"
