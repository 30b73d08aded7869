"""The report gathers results into tables that are sorted, byte-stable and set beside the guide,
and names every failed input. Results are computed from the real fixtures and written as the
notebooks write them (`nb.write_result`); failed ones as `run.execute` writes them."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from conftest import vocab
from llgbridge import census, guide, nb, probe, report
from llgbridge.paths import write_json


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("results")
    for name in ("llama-bpe", "bert-bge"):  # written out of the guide's order on purpose
        v = vocab(name)
        nb.write_result(str(out), "census", name, census.run_census(v).to_json())
        nb.write_result(str(out), "probe", name, {"literal": "hello world", "probe": probe.probe_row(v), "cases": []})
    write_json(out / "probe" / "broken.json", {"status": "failed", "notebook": "probe", "vocab": "broken",
                                               "error": "InputError: data/vocabs/ggml-vocab-broken.gguf: no such file"})
    return out


def build(results: Path, out: Path) -> dict[str, bytes]:
    report.build(results, out)
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_the_report_is_byte_stable(results: Path, tmp_path: Path) -> None:
    first, second = build(results, tmp_path / "a"), build(results, tmp_path / "b")
    assert first == second
    assert {"index.html", "pr-review-tables.md", "run.json", "tables/census.csv", "tables/probe.csv", "tables/inputs.csv"} <= set(first)


def test_census_sits_beside_the_guides_figures(results: Path, tmp_path: Path) -> None:
    report.build(results, tmp_path)
    df = pd.read_csv(tmp_path / "tables" / "census.csv")
    assert list(df.vocab) == ["bert-bge", "llama-bpe"]  # tables sort by vocab
    for name in ("bert-bge", "llama-bpe"):
        differing, lost, n = guide.CENSUS[name]
        row = df[df.vocab == name].iloc[0]
        assert (row.differing, row.lost_leading_space, row.n_tokens) == (differing, lost, n)
    md = (tmp_path / "pr-review-tables.md").read_text()
    # the guide's vocabs come first, in the guide's order (llama-bpe before bert-bge)
    assert md.index("ggml-vocab-llama-bpe.gguf") < md.index("ggml-vocab-bert-bge.gguf")
    assert "| 117 / 128256 " in md and "| 5 / 30522 " in md and "| NO " not in md


def test_failed_inputs_are_named_everywhere(results: Path, tmp_path: Path) -> None:
    failed = report.build(results, tmp_path)
    assert [(f["notebook"], f["vocab"]) for f in failed] == [("probe", "broken")]
    assert "**Failed inputs:** probe/broken: InputError: data/vocabs/ggml-vocab-broken.gguf: no such file" in (tmp_path / "pr-review-tables.md").read_text()
    assert "<h2>Failed inputs</h2>" in (tmp_path / "index.html").read_text()
    inputs = pd.read_csv(tmp_path / "tables" / "inputs.csv", keep_default_na=False)
    assert inputs[inputs.status == "failed"][["analysis", "input"]].values.tolist() == [["probe", "broken"]]
    assert report.main(["--results", str(results), "--out", str(tmp_path / "again")]) == 1


@pytest.mark.parametrize(
    "witness, kind",
    [("b'<|eot_id|>'", "special"), ("b'\\xfe'", "invalid UTF-8"), ("b'\\xc3\\xa9 x'", "text")],
)
def test_witness_kinds(witness: str, kind: str) -> None:
    assert report._witness_kind(witness) == kind
