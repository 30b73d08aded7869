"""The other engines end to end (issue 46): a row's bytes are the recorded tokens' real bytes as
llama-cpp-python itself gives them, and the judgement refuses a token the grammar forbids.

Real parts only: the synthetic llama-spm model, the libraries' own logits processors, the real
llama-server for llama.cpp's GBNF sampler, and llama-cpp-python's own `Llama.detokenize` for the bytes.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from llgbridge import synth
from llgbridge.analyses.engines_e2e import compute as e2e
from llgbridge.analyses.matrix import compute as matrix
from llgbridge.analyses.server import llama_server as S
from llgbridge.generate import load_model
from llgbridge.inputs import Input
from llgbridge.modelfile import ModelFile
from llgbridge.paths import ROOT

VOCAB = "llama-spm"
MODEL = ROOT / "data/models" / f"synthetic-{VOCAB}.gguf"


@pytest.fixture(scope="module", autouse=True)
def model() -> Path:
    """The synthetic model (`make test` makes it first, as `make report` does), or made here by the
    same call where pytest runs alone: a test that skipped without it proved nothing."""
    made = synth.ensure_model(VOCAB)
    assert made == MODEL
    return made


@cache
def rows() -> list[dict[str, Any]]:
    paths = matrix.model_paths(Input.make(VOCAB), "data/models", 0)
    return e2e.run(VOCAB, False, paths, (), ["lm-format-enforcer"], e2e.Settings())["rows"]


@cache
def llm() -> Any:
    return load_model(ModelFile.read(MODEL), n_threads=1)


def pieces(tokens: list[int]) -> bytes:
    """llama-cpp-python's own bytes for `tokens`: `Llama.detokenize` of one token at a time (its
    `llama_token_to_piece(t, 0, special=False)`; no token here is BOS, whose space it strips), joined."""
    return b"".join(llm().detokenize([t]) for t in tokens)


@pytest.mark.parametrize("case", list(e2e.CASES))
def test_row_bytes_are_the_tokens_pieces(case: str) -> None:
    row = next(r for r in rows() if r["case"] == case)
    tokens = [int(t) for t in row["tokens"].split()]
    assert tokens, row
    got = pieces(tokens)
    assert row["output"].encode() == got
    # the judgement is the case's own, on those bytes
    want = {"leak": e2e.LEAK_REGEX, "forced_literal": "hello world"}[case]
    if row["stop"].startswith("eog"):
        assert (row["matches"] == "full") == (re.fullmatch(want, got.decode("utf-8", "replace")) is not None)


def test_judgement_refuses_a_forbidden_token() -> None:
    """By hand on llama-spm: token 29871 is '▁', a lone space; token 8066 is 'your'. 'your' then
    '!' is a leak match; a space inside it is not, whether generation ended or stopped at the limit;
    'hel' is a prefix of the literal at the limit, ' hel' is not."""
    assert pieces([29871]) == b" "
    your = pieces([8066])
    assert your == b"your"
    assert e2e.judge("leak", your + b"!", "eog") == "full"
    assert e2e.judge("leak", your + b" !", "eog") == "no"
    assert e2e.judge("leak", b" " + your, "limit") == "no"
    assert e2e.judge("leak", your, "limit") == "prefix"
    assert e2e.judge("forced_literal", b"hel", "limit") == "prefix"
    assert e2e.judge("forced_literal", b" hel", "limit") == "no"
    assert e2e.judge("forced_literal", b"hello world", "eog") == "full"


@cache
def gbnf_rows() -> list[dict[str, Any]]:
    paths = matrix.model_paths(Input.make(VOCAB), "data/models", 0)
    return e2e.run(VOCAB, False, paths, (), [e2e.GBNF], e2e.Settings())["rows"]


@pytest.mark.skipif(bool(S.built()[1]), reason=f"servers not built: {S.built()[1]}")
def test_gbnf_rows_are_the_servers_tokens_and_content() -> None:
    """llama.cpp's GBNF sampler through the real llama-server on synthetic llama-spm: each row's
    bytes are the returned tokens' pieces (llama-cpp-python's own `detokenize`, one token at a
    time), and the server's own `content` is those bytes; the literal is spelled exactly."""
    rows = gbnf_rows()
    cases = ["leak", "forced_literal", "json_enum", "special_literal", "control_literal"]
    assert [r["case"] for r in rows] == cases, rows
    for row in rows:
        assert row["error"] == "" and row["content_match"] == "same", row
        got = pieces([int(t) for t in row["tokens"].split()])
        assert row["output"].encode() == got and row["text"].encode() == got, row
    forced = next(r for r in rows if r["case"] == "forced_literal")
    assert forced["output"] == "hello world" and forced["stop"].startswith("eog"), forced


def guidance_rows() -> list[dict[str, Any]]:
    paths = matrix.model_paths(Input.make(VOCAB), "data/models", 0)
    return e2e.run(VOCAB, False, paths, (), ["guidance"], e2e.Settings())["rows"]


@pytest.mark.parametrize("case", list(e2e.CASES))
def test_guidance_row_bytes_are_its_tokens_pieces(case: str) -> None:
    """guidance's own engine on the synthetic model, in its own process with its own pins
    (llguidance 1.5.0, installed apart): the row's bytes are the pieces of the tokens its engine
    yielded, by llama-cpp-python's `detokenize`; the prompt `Output:` ends in ':' alone (by hand:
    `tokenize(b"Output:")` is BOS, ' Output', ':'), which guidance's token healing takes back, so
    its tokens' pieces begin with ':' where it does."""
    row = next(r for r in guidance_rows() if r["case"] == case)
    assert row["version"] == "guidance 0.3.1, llguidance 1.5.0, guidance-stitch 0.1.5", row
    tokens = [int(t) for t in row["tokens"].split()]
    got = pieces(tokens)
    assert got in (row["output"].encode(), b":" + row["output"].encode()), (got, row)
    if case == "forced_literal":
        assert row["output"].encode() == b"hello world" and row["outcome"] == "ok"
    else:
        assert re.fullmatch(e2e.LEAK_REGEX, row["output"]) is not None and row["outcome"] == "ok"
    assert row["text"] == row["output"]


def test_healed_prompt_bytes_are_taken_off_the_front() -> None:
    """By hand on llama-spm: 29901 is ':', 8066 'your'. guidance took ':' back from the prompt and
    generated ':your': the output is 'your'; tokens that do not begin with the healed bytes are said."""
    from conftest import vocab

    v = vocab(VOCAB)
    assert e2e.healed(v, {"tokens": [29901, 8066], "healed": [29901]}) == (b"your", "")
    assert e2e.healed(v, {"tokens": [8066]}) == (b"your", "")
    real, why = e2e.healed(v, {"tokens": [8066], "healed": [29901]})
    assert (real, why) == (b"your", "its tokens do not begin with the healed prompt tokens' bytes b':'")
