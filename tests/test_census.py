"""The byte-diff census reproduces the guide's table 4.3 and its examples (by token id and bytes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import vocab

from llgbridge import guide
from llgbridge.analyses.census import compute as census
from llgbridge.vocab import Vocab


@pytest.fixture(scope="module", params=sorted(guide.CENSUS))
def result(request: pytest.FixtureRequest) -> census.Census:
    return census.run_census(vocab(request.param))


def test_census_matches_guide_table_4_3(result: census.Census) -> None:
    differing, lost, n = guide.CENSUS[result.vocab]
    assert (result.differing, result.lost_leading_space, result.n_tokens) == (differing, lost, n)


def test_guide_example_bytes(result: census.Census) -> None:
    tok, piece, detok = guide.EXAMPLES[result.vocab]
    d = {x.token: x for x in result.diffs}[tok]
    assert (d.piece, d.detok) == (piece, detok)


def test_every_difference_is_explained(result: census.Census) -> None:
    assert result.by_mechanism()["other"] == 0


def test_mechanisms_follow_the_vocab_family() -> None:
    # SPM loses spaces to lstrip (add_space_prefix); BPE to the clean_spaces pass (guide 4.2)
    spm = census.run_census(vocab("llama-spm")).by_mechanism()
    bpe = census.run_census(vocab("llama-bpe")).by_mechanism()
    assert spm["lstrip"] > 0 and bpe["lstrip"] == 0
    assert bpe["clean_spaces"] == 117


@pytest.mark.parametrize(
    "text, cleaned",
    [
        (b" .", b"."),
        (b"a ?", b"a?"),
        (b"x ' y", b"x'y"),
        (b" 's", b"'s"),
        (b" 't", b" 't"),
        (b" 're", b"'re"),
        (b" 'll", b" 'll"),
        (b"", b""),
    ],
)
def test_clean_spaces_port(text: bytes, cleaned: bytes) -> None:
    assert census.clean_spaces(text) == cleaned


def test_a_wrong_typed_field_costs_its_one_result_not_the_section(tmp_path: Path) -> None:
    # issue 24.6: summary.differing as "23" in one census result cost the whole census section
    # ("FAILED census/(all): ... TypeError") and every census row left the page
    from llgbridge import report, results

    # each result computed here as the census notebook computes it (a fresh clone has no data/results)
    for v in ("llama-spm", "gpt-2", "bert-bge"):
        r = {"status": "ok", "notebook": "census", "vocab": v, **census.run_census(vocab(v)).to_json()}
        if v == "gpt-2":
            r["summary"]["differing"] = "23"
        (tmp_path / "census").mkdir(exist_ok=True)
        (tmp_path / "census" / f"{v}.json").write_text(json.dumps(r))
    ok, failed = results.load(tmp_path, "census")
    assert [r["vocab"] for r in ok] == ["bert-bge", "llama-spm"]
    assert failed == [
        {
            "notebook": "census",
            "vocab": "gpt-2",
            "error": "unusable result: "
            f'{tmp_path / "census" / "gpt-2.json"}: summary.differing is str ("23"), expected int',
        }
    ]
    sec = report.census_section(tmp_path)
    assert sec is not None
    assert sorted(sec.raw[0].df.vocab) == ["bert-bge", "llama-spm"]


def _ctypes_differences(v: Vocab) -> list[tuple[int, bytes, bytes, bytes]]:
    """The census's pass through llama-cpp-python's own ctypes bindings, one call at a time."""
    import ctypes

    import llama_cpp

    out = []
    buf = [ctypes.create_string_buffer(1024) for _ in range(3)]
    for t in range(v.n_tokens):
        n = llama_cpp.llama_token_to_piece(v.llama_vocab, t, buf[0], 1024, 0, False)
        m = llama_cpp.llama_detokenize(v.llama_vocab, (llama_cpp.llama_token * 1)(t), 1, buf[1], 1024, False, False)
        if n != m or buf[0].raw[:n] != buf[1].raw[:m]:
            k = llama_cpp.llama_token_to_piece(v.llama_vocab, t, buf[2], 1024, 1, False)
            out.append((t, buf[0].raw[:n], buf[1].raw[:m], buf[2].raw[:k]))
    return out


@pytest.mark.parametrize("name", ["llama-spm", "gpt-2", "bert-bge"])
def test_the_compiled_pass_gives_what_llama_cpp_pythons_bindings_give(name: str) -> None:
    """`Vocab.piece_detok_differences` is one compiled loop (`_llamacall.c`); llama-cpp-python's
    ctypes bindings, called token by token, are the same llama.cpp reached another way."""
    v = vocab(name)
    got = v.piece_detok_differences()
    assert got == _ctypes_differences(v) and got  # every one of these vocabs has differing tokens
