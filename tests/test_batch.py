"""One vocab's analyses in one kernel (`run.execute_batch`), and which of them `make report` reruns
(`batch.plan`). The batch must give the same results as one run per notebook, byte for byte, and
a crash inside native code must end only its own notebook's run."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from llgbridge import batch, run
from llgbridge.paths import ROOT, VOCABS


def _payload(path: Path) -> dict:
    r = json.loads(path.read_text())
    r.pop("provenance", None)
    return r


@pytest.fixture(scope="module")
def batched(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("batch")
    statuses = run.execute_batch("llama-bpe", ["probe", "census"], out_root=out / "reports", results_dir=out / "results")
    assert [(s["notebook"], s["status"]) for s in statuses] == [("probe", "ok"), ("census", "ok")], statuses
    return out


def test_a_batch_gives_what_one_run_per_notebook_gives(batched: Path, tmp_path: Path) -> None:
    for notebook in ("probe", "census"):
        st = run.execute(notebook, "llama-bpe", out_root=tmp_path / "reports", results_dir=tmp_path / "results")
        assert st["status"] == "ok", st
        assert _payload(batched / "results" / notebook / "llama-bpe.json") == _payload(tmp_path / "results" / notebook / "llama-bpe.json")
    page = (batched / "reports" / "html" / "census" / "llama-bpe.html").read_text()
    assert "<title>census · llama-bpe</title>" in page and str(ROOT) not in page


def test_the_plan_runs_only_what_is_out_of_date(batched: Path, tmp_path: Path) -> None:
    import shutil

    res = tmp_path / "results"
    shutil.copytree(batched / "results", res)
    assert batch.plan("llama-bpe", ["probe", "census", "leak"], res) == {"leak": "no result yet"}
    # a result made by other code: the analysis whose notebook or modules changed runs again
    census = res / "census" / "llama-bpe.json"
    r = json.loads(census.read_text())
    r["provenance"]["code"] = "0" * 16
    census.write_text(json.dumps(r))
    assert batch.plan("llama-bpe", ["probe", "census"], res) == {"census": "its code changed"}
    r["provenance"]["params"] = {**r["provenance"]["params"], "n_examples": 99}
    census.write_text(json.dumps(r))
    assert batch.out_of_date("census", "llama-bpe", res) in ("its code changed", "made with other parameters")
    census.write_text(json.dumps({"status": "failed", "notebook": "census", "vocab": "llama-bpe", "error": "x"}))
    assert batch.out_of_date("census", "llama-bpe", res) == "failed last time"


@pytest.mark.slow
def test_a_crash_in_a_batch_ends_only_its_notebook(tmp_path: Path) -> None:
    from test_hostile import abort_notebook
    from test_inputs import _notebook

    nbs = abort_notebook(tmp_path)
    ok = ("import json, pathlib\np = pathlib.Path(results_dir) / 'fine' / (vocab + '.json')\np.parent.mkdir(parents=True, exist_ok=True)\n"
          "p.write_text(json.dumps({'status': 'ok', 'notebook': 'fine', 'vocab': vocab}))")
    _notebook(nbs, "fine", ok)
    code = ("import json; from pathlib import Path; from llgbridge import run\n"
            f"st = run.execute_batch('x', ['abort', 'fine', 'abort'], out_root=Path({str(tmp_path / 'r')!r}), "
            f"results_dir=Path({str(tmp_path / 'res')!r}), notebooks_dir=Path({str(nbs)!r}))\nprint(json.dumps(st))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=600)
    st = json.loads(out.stdout.splitlines()[-1])
    assert [s["status"] for s in st] == ["failed", "ok", "failed"], st
    assert all(s["error"].startswith("the kernel died: llama-vocab.cpp:") for s in st if s["status"] == "failed"), st
    assert "GGML_ASSERT" in (tmp_path / "r" / st[0]["log"]).read_text()
    assert os.stat(tmp_path / "res" / "abort" / "x.json").st_mtime == 0  # retried by the next make
    assert len(out.stderr.splitlines()) < 10, out.stderr[-2000:]  # no gdb flood
    assert VOCABS.exists()
