"""`make whatif` on a fixture copied under another name gives a report of its own."""
from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from llgbridge import whatif
from llgbridge.errors import InputError
from llgbridge.paths import VOCABS


@pytest.mark.slow
def test_whatif_on_a_renamed_fixture(tmp_path: Path) -> None:
    mine = tmp_path / "my-vocab.gguf"
    shutil.copy(VOCABS / "ggml-vocab-llama-spm.gguf", mine)
    out = tmp_path / "report"
    st = whatif.whatif(mine, params={"literal": "hi there", "cases": ["forced_literal"]}, out=out, models_dir=tmp_path / "models")
    assert [s["status"] for s in st] == ["ok"] * len(whatif.ANALYSES), st
    census = pd.read_csv(out / "tables" / "census.csv")
    assert census[["vocab", "differing", "lost_leading_space"]].values.tolist() == [["my-vocab", 16410, 16395]]
    forced = pd.read_csv(out / "tables" / "forced.csv")
    assert set(forced.vocab) == {"my-vocab"} and sorted(forced.bridge) == ["failclosed", "fixed", "nospecial", "sentinel", "upstream"]
    matrix = pd.read_csv(out / "tables" / "matrix.csv")
    assert sorted(zip(matrix.bridge, matrix.outcome)) == [("fixed", "pass"), ("sentinel", "pass"), ("upstream", "violation")]
    assert (out / "index.html").exists() and (out / "html" / "census" / "my-vocab.html").exists()


def test_whatif_refuses_an_unknown_parameter(tmp_path: Path) -> None:
    mine = tmp_path / "x.gguf"
    shutil.copy(VOCABS / "ggml-vocab-llama-spm.gguf", mine)
    with pytest.raises(InputError, match="parameter colour: no analysis notebook takes it"):
        whatif.whatif(mine, params={"colour": "red"}, out=tmp_path / "r")


def test_whatif_refuses_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="nope.gguf: no such file"):
        whatif.whatif(tmp_path / "nope.gguf", out=tmp_path / "r")
