"""The analysis notebooks execute under papermill on a small fixture and write their result."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from llgbridge import run
from llgbridge.errors import InputError
from llgbridge.paths import ROOT

ALL_NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("name", ALL_NOTEBOOKS)
def test_notebook_is_committed_clean_with_a_parameters_cell(name: str) -> None:
    nb = nbformat.read(str(ROOT / "notebooks" / f"{name}.ipynb"), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code)
    assert sum("parameters" in c.metadata.get("tags", []) for c in code) == 1
    assert nb.metadata.kernelspec.name == "python3" and nb.metadata.language_info.name == "python"


@pytest.mark.slow
def test_census_notebook_runs_under_papermill(tmp_path: Path) -> None:
    st = run.execute("census", "bert-bge", out_root=tmp_path / "reports", results_dir=tmp_path / "results")
    assert st["status"] == "ok", st
    res = json.loads((tmp_path / "results" / "census" / "bert-bge.json").read_text())
    assert (res["summary"]["differing"], res["summary"]["lost_leading_space"]) == (5, 5)
    assert (tmp_path / "reports" / "html" / "census" / "bert-bge.html").stat().st_size > 0


@pytest.mark.slow
def test_a_failing_notebook_becomes_a_failed_result(tmp_path: Path) -> None:
    st = run.execute("census", "no-such-vocab", out_root=tmp_path / "reports", results_dir=tmp_path / "results")
    assert st["status"] == "failed"
    assert "no-such-vocab" in st["error"] and "no such file" in st["error"]
    res = json.loads((tmp_path / "results" / "census" / "no-such-vocab.json").read_text())
    assert res["status"] == "failed"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["leak", "forced", "probe"])
def test_mask_and_probe_notebooks_run_under_papermill(name: str, tmp_path: Path) -> None:
    st = run.execute(name, "llama-bpe", out_root=tmp_path / "reports", results_dir=tmp_path / "results")
    assert st["status"] == "ok", st
    res = json.loads((tmp_path / "results" / name / "llama-bpe.json").read_text())
    assert res["status"] == "ok"


@pytest.mark.slow
def test_leak_notebook_takes_a_grammar_parameter(tmp_path: Path) -> None:
    st = run.execute("leak", "llama-bpe", {"grammar": 'start: /[a-z]{2,4}/ "?"'}, tmp_path / "r", tmp_path / "res")
    assert st["status"] == "ok", st
    res = json.loads((tmp_path / "res" / "leak" / "llama-bpe.json").read_text())
    assert res["grammar"] == 'start: /[a-z]{2,4}/ "?"'


@pytest.mark.slow
def test_a_parameter_of_the_wrong_type_is_named(tmp_path: Path) -> None:
    """Refused before a kernel starts by `run`, and by the notebook itself when run by hand."""
    import papermill as pm

    with pytest.raises(InputError, match=r"^parameter max_steps: expected int, got str 'many'$"):
        run.execute("forced", "llama-bpe", {"max_steps": "many"}, tmp_path / "r", tmp_path / "res")
    with pytest.raises(pm.PapermillExecutionError) as e:
        pm.execute_notebook(
            str(ROOT / "notebooks" / "forced.ipynb"),
            str(tmp_path / "out.ipynb"),
            cwd=str(ROOT),
            progress_bar=False,
            parameters={"input": "llama-bpe", "results_dir": str(tmp_path / "res"), "max_steps": "many"},
        )
    assert (e.value.ename, e.value.evalue) == ("InputError", "parameter max_steps: expected int, got str 'many'")
