"""llama.cpp's key overrides as part of an input (issue 30): Gemma 3 270M, a trained model, loaded with
`tokenizer.ggml.add_space_prefix=bool:true` gets the SentencePiece space prefix of TinyLlama and
Mistral, and with it the guide's two failure modes through the real llama-server.

Each test that shows the override's effect runs the same call without it beside it, so it fails
when the override is dropped anywhere along the way (the expectations are the issue's hand-checked
facts: `[29104 ' hello', 1902]` against `[23391 'hello', 1902]`, 137,542 differing tokens, and the
upstream server's `llg error` on the forced literal).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gguf import Keys
from helpers import write_vocab

from llgbridge import catalogue, generate, models, overrides, params, results
from llgbridge.analyses.census.compute import run_census
from llgbridge.analyses.native import compute as native
from llgbridge.analyses.server import compute as server
from llgbridge.analyses.server import llama_server as S
from llgbridge.errors import InputError
from llgbridge.generation import Chat
from llgbridge.inputs import Input
from llgbridge.modelfile import ModelFile
from llgbridge.vocab import Vocab

NAME = "gemma3-270m+space-prefix"
SPACE = "tokenizer.ggml.add_space_prefix=bool:true"


@pytest.fixture(scope="module")
def gemma() -> Path:
    try:
        return models.model_path("gemma3-270m")
    except InputError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def spaced(gemma: Path) -> Vocab:
    return Vocab(gemma, NAME, [SPACE])


@pytest.fixture(scope="module")
def plain(gemma: Path) -> Vocab:
    return Vocab(gemma, "gemma3-270m")


# -- the syntax, as llama.cpp's --override-kv takes it ---------------------------------------------------
@pytest.mark.parametrize(
    "text, says",
    [
        ("tokenizer.ggml.add_space_prefix", "no '='"),
        ("=bool:true", "an empty key"),
        ("k=yes:1", "unknown type 'yes'"),
        ("k=bool:yes", "'yes' is not a boolean"),
        ("k=int:abc", "'abc' is not a whole number"),  # std::atol would take it as 0
        ("k=int:99999999999999999999", "does not fit"),
        ("k=float:1x", "'1x' is not a number"),
        ("k=str:" + "x" * 128, "at most 127"),
        ("k=str:a,b", "a comma"),  # --override-kv splits its argument as a CSV row
        ("k" * 128 + "=int:1", "at most 127"),
    ],
)
def test_a_bad_override_is_refused_in_one_line_naming_it(text: str, says: str) -> None:
    with pytest.raises(InputError) as e:
        overrides.parse(text)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"override {text!r}:") and says in msg, msg


def test_overrides_are_spelled_one_way_and_a_key_once() -> None:
    assert overrides.canonical(["b=int:007", "a=float:1", "c=bool:false", "d=str:x y"]) == [
        "a=float:1.0",
        "b=int:7",
        "c=bool:false",
        "d=str:x y",
    ]
    with pytest.raises(InputError, match="overridden twice"):
        overrides.parse_all(["a=int:1", "a=int:2"])
    assert overrides.suffix(overrides.parse_all([SPACE])) == "+add_space_prefix-true"


def test_a_notebook_refuses_a_bad_override_before_it_runs() -> None:
    with pytest.raises(InputError, match=r"override 'x=bool:1'.*not a boolean"):
        Input.make("llama-spm", overrides=["x=bool:1"])


# -- llama.cpp takes it, or the input is refused ----------------------------------------------------------
def test_an_override_llama_cpp_never_reads_or_reads_as_another_type_is_refused(gemma: Path) -> None:
    with pytest.raises(InputError) as e:
        Vocab(gemma, "x", ["tokenizer.ggml.nonesuch=bool:true"])
    assert str(e.value) == (
        "override 'tokenizer.ggml.nonesuch=bool:true': llama.cpp never read tokenizer.ggml.nonesuch while loading "
        "gemma-3-270m-q4_k_m.gguf: the override changes nothing there"
    )
    with pytest.raises(InputError) as e:
        Vocab(gemma, "x", ["tokenizer.ggml.add_space_prefix=int:1"])
    assert "llama.cpp reads tokenizer.ggml.add_space_prefix as bool, not int, and kept the file's value" in str(e.value)


def test_an_override_llama_cpp_cannot_load_with_names_it_and_llama_cpps_reason(gemma: Path) -> None:
    bad = "general.architecture=str:nonesuch"
    for load in (
        lambda: Vocab(gemma, "x", [bad]),
        lambda: generate.load_model(ModelFile.read(gemma), n_ctx=64, overrides=[bad]),
    ):
        with pytest.raises(InputError) as e:
            load()
        assert (
            str(e.value)
            == f"gemma-3-270m-q4_k_m.gguf with {bad}: llama.cpp cannot load it: unknown model architecture: 'nonesuch'"
        )


# -- what the override does to llama.cpp's tokenizer --------------------------------------------------------
def test_llama_tokenize_prepends_the_space_with_the_override(spaced: Vocab, plain: Vocab) -> None:
    with_it, without = spaced.tokenize(b"hello world", False, True), plain.tokenize(b"hello world", False, True)
    assert [spaced.token_to_piece(t) for t in with_it] == [b" hello", b" world"] and with_it == [29104, 1902]
    assert [plain.token_to_piece(t) for t in without] == [b"hello", b" world"] and without == [23391, 1902]


def test_llama_cpp_pythons_model_takes_the_override_too(gemma: Path) -> None:
    with_it = generate.load_model(ModelFile.read(gemma), n_ctx=64, overrides=[SPACE])
    without = generate.load_model(ModelFile.read(gemma), n_ctx=64)
    assert with_it.tokenize(b"hello world", add_bos=False) == [29104, 1902]
    assert without.tokenize(b"hello world", add_bos=False) == [23391, 1902]


def test_the_census_finds_lost_space_tokens_on_the_overridden_model(spaced: Vocab, plain: Vocab) -> None:
    c, c0 = run_census(spaced), run_census(plain)
    assert (c.differing, c.n_tokens) == (137542, 262144)  # the figure, checked by hand
    assert c0.differing == 0
    d = next(d for d in c.diffs if d.token == 29104)
    assert (d.piece, d.detok, d.mechanism) == (b" hello", b"hello", "lstrip")


def test_the_input_takes_its_overrides_from_the_registry() -> None:
    assert catalogue.overrides_of(NAME) == (SPACE,) and catalogue.overrides_of("gemma3-270m") == ()
    assert catalogue.REAL_MODELS[NAME].file == catalogue.REAL_MODELS["gemma3-270m"].file
    assert Input.make(NAME).load_texts() == [SPACE]
    # a file given: only the overrides given with it
    assert Input.make(NAME, "data/models/gemma-3-270m-q4_k_m.gguf").load_texts() == []
    assert Input.make("llama-spm", overrides=["tokenizer.ggml.add_space_prefix=bool:false"]).load_texts() == [
        "tokenizer.ggml.add_space_prefix=bool:false"
    ]


# -- provenance: the same file with and without the override are two inputs -------------------------------
def _result(made_for: str, filed_as: str) -> dict[str, object]:
    p = params.check("census", {"input": made_for})
    r = {"status": "ok", "notebook": "census", "vocab": filed_as, "provenance": results.provenance("census", p)}
    return {**r, "digest": results.digest(r)}  # as a run writes it


def test_a_result_without_the_override_is_not_current_for_the_overridden_input(gemma: Path) -> None:
    assert results.why_stale(results.RESULTS, "census", _result(NAME, NAME)) == ""
    assert results.why_stale(results.RESULTS, "census", _result("gemma3-270m", "gemma3-270m")) == ""
    # the plain model's result filed under the overridden input's name, and the other way round: the
    # file is the same, its sha256 too, so only the overrides tell them apart
    assert (
        results.why_stale(results.RESULTS, "census", _result("gemma3-270m", NAME))
        == f"it was made without the override {SPACE}, which this input is loaded with"
    )
    assert (
        results.why_stale(results.RESULTS, "census", _result(NAME, "gemma3-270m"))
        == f"it was made with the override {SPACE}, which this input is not loaded with"
    )


def test_the_report_refuses_a_plain_result_copied_onto_the_overridden_input(tmp_path: Path) -> None:
    (tmp_path / "census").mkdir()
    r = {
        **_result("gemma3-270m", NAME),
        "summary": {"vocab": NAME, "differing": 0, "n_tokens": 262144, "lost_leading_space": 0},
        "diffs": [],
    }
    r["digest"] = results.digest(r)
    (tmp_path / "census" / f"{NAME}.json").write_text(json.dumps(r))
    ok, failed = results.load(tmp_path, "census")
    assert ok == [] and [f["error"] for f in failed] == [
        f"stale result: it was made without the override {SPACE}, which this input is loaded with; make report reruns "
        f"it"
    ]


def test_a_model_given_with_overrides_is_an_input_not_a_setting() -> None:
    given = Input.make("model-m+add_space_prefix-true", models=["m.gguf"], overrides=[SPACE]).param()
    assert params.changed("matrix", params.check("matrix", {"input": given})) == {}
    on_spm = Input.make("llama-spm", overrides=[SPACE]).param()
    assert params.changed("matrix", params.check("matrix", {"input": on_spm})) == {"overrides": [SPACE]}


def test_an_overridden_input_never_shares_a_synthetic_model(tmp_path: Path) -> None:
    from llgbridge import synth

    plain_model = synth.ensure_model("llama-spm", tmp_path)
    kv = overrides.canonical(["tokenizer.ggml.add_space_prefix=bool:false"])
    own = synth.ensure_model("llama-spm", tmp_path, overrides=overrides.parse_all(kv))
    assert own != plain_model and own.name.startswith("synthetic-llama-spm+kv-")
    from llgbridge.gguf_meta import read_kv

    assert read_kv(own)[0][synth.OVERRIDES_KEY] == kv[0] and synth.OVERRIDES_KEY not in read_kv(plain_model)[0]


# -- the compiled programs: llama.cpp's own test, as shipped, with the override through ld --wrap -------------
def test_the_prs_test_sees_bug_b_on_the_overridden_model(spaced: Vocab, plain: Vocab) -> None:
    why = native.unavailable()
    if why:
        pytest.skip(why)
    with_it = native.run_test("pr", "upstream", spaced.path, llg=native.LLG_PINNED, overrides=spaced.overrides)
    without = native.run_test("pr", "upstream", plain.path, llg=native.LLG_PINNED)
    # the forced literal's mask: one token, the space-prefixed piece the matcher then dies on
    assert [spaced.token_to_piece(t) for t in with_it.forced_tokens] == [b" hello"]
    assert [plain.token_to_piece(t) for t in without.forced_tokens] == [b"hello"]
    assert with_it.exit_code == 134 and native.classify(with_it, spaced, 106)[0] == "space_tokens"


# -- the product: llama-server with --override-kv ----------------------------------------------------------
@pytest.mark.slow
def test_the_upstream_server_breaks_the_forced_literal_on_real_weights(
    spaced: Vocab, plain: Vocab, tmp_path: Path
) -> None:
    _, why = S.built()
    if why:
        pytest.skip(why)
    prompts = server.prompts_for(Chat.of(ModelFile.read(spaced.path), spaced), ["forced_literal"], "completion")
    got = {}
    # the three builds the assertions read (the fixed build without the override says nothing here)
    for v, sampler in ((spaced, "upstream"), (spaced, "fixed"), (plain, "upstream")):
        rows, _ = server.run_cases(
            server.ServerRun(
                S.binary(sampler, S.LLG_PINNED),
                v.path,
                v,
                False,
                S.LLG_PINNED,
                sampler,
                ["forced_literal"],
                prompts,
                tmp_path / f"{v.name}-{sampler}.log",
                16,
                0,
                0.0,
            )
        )
        got[(v.name, sampler)] = rows[0]
    up, fx = got[(NAME, "upstream")], got[(NAME, "fixed")]
    # HTTP 200, no error field: the only signs are the log's llg error and the text the grammar forbids
    assert (up.http_status, up.error_field, up.outcome) == (200, False, "violation")
    assert up.llg_errors >= 1 and "doesn't satisfy the grammar" in up.error
    assert spaced.real_bytes(up.tokens).startswith(b" hello")
    assert (
        "Using metadata override ( bool) 'tokenizer.ggml.add_space_prefix'"
        in (tmp_path / f"{NAME}-upstream.log").read_text()
    )
    assert (fx.outcome, spaced.real_bytes(fx.tokens)) == ("pass", b"hello world")
    # without the override the same build passes: the failure is the space prefix's
    assert got[("gemma3-270m", "upstream")].outcome == "pass"


# -- llama.cpp's test: a cause no rule knows is said, with its evidence ------------------------------------
def test_an_abort_no_rule_knows_is_cause_not_classified_with_its_assertion(tmp_path: Path) -> None:
    why = native.unavailable()
    if why:
        pytest.skip(why)
    # a duplicate token: llama.cpp's own loader stops on a GGML_ASSERT, before the test's first check
    dup = write_vocab(
        tmp_path / "dup.gguf", lambda k, v: v[:300] + [v[301]] + v[301:] if k == Keys.Tokenizer.LIST else v
    )
    run = native.run_test("pr", "fixed", dup)
    assert native.classify(run, None, 2) == (
        "unclassified",
        "cause not classified: llama-vocab.cpp:2544: GGML_ASSERT(id_to_token.size() == token_to_id.size()) failed",
    )


def test_the_tok_eos_rule_names_bert_bges_abort() -> None:
    from conftest import vocab

    why = native.unavailable()
    if why:
        pytest.skip(why)
    v = vocab("bert-bge")
    run = native.run_test("pr", "fixed", v.path)
    assert native.classify(run, v, -1) == ("no_eos", "tok_eos = -1 (no EOT, no EOS): test_sampler_chain reads cur[-1]")
