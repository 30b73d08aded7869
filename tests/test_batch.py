"""One vocab's analyses in one kernel (`run.execute_batch`), which of them `make report` reruns
(`batch.plan`), and the pool of workers that runs them (`batch.run_pool`, sized by Make's
jobserver). The batch must give the same results as one run per notebook, byte for byte, a crash
inside native code must end only its own notebook's run, and a worker that dies only its input's."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import PROGRAMS, abort_notebook, write_notebook

from llgbridge import batch, run
from llgbridge.paths import ROOT, VOCABS


def _payload(path: Path) -> dict:
    r = json.loads(path.read_text())
    r.pop("provenance", None)
    return r


@pytest.fixture(scope="module")
def batched(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("batch")
    statuses = run.execute_batch(
        "llama-bpe", ["probe", "census"], out_root=out / "reports", results_dir=out / "results"
    )
    assert [(s["notebook"], s["status"]) for s in statuses] == [("probe", "ok"), ("census", "ok")], statuses
    for st in statuses:
        run.write_timing(out / "results", st)
    return out


def test_a_vocab_is_loaded_once_for_all_its_analyses(batched: Path) -> None:
    timing = [
        json.loads((batched / "results" / ".timing" / n / "llama-bpe.json").read_text()) for n in ("probe", "census")
    ]
    assert timing[0]["load"] > 0 and timing[1]["load"] == 0, timing  # census reused probe's load


def test_a_batch_gives_what_one_run_per_notebook_gives(batched: Path, tmp_path: Path) -> None:
    for notebook in ("probe", "census"):
        st = run.execute(notebook, "llama-bpe", out_root=tmp_path / "reports", results_dir=tmp_path / "results")
        assert st["status"] == "ok", st
        assert _payload(batched / "results" / notebook / "llama-bpe.json") == _payload(
            tmp_path / "results" / notebook / "llama-bpe.json"
        )
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
    nbs = abort_notebook(tmp_path)
    ok = (
        "import json, pathlib\np = pathlib.Path(results_dir) / 'fine' / (input['name'] + "
        "'.json')\np.parent.mkdir(parents=True, exist_ok=True)\np.write_text(json.dumps({'status': 'ok', 'notebook': "
        "'fine', 'vocab': input['name']}))"
    )
    write_notebook(nbs, "fine", ok)
    out = subprocess.run(
        [
            sys.executable,
            str(PROGRAMS / "execute_batch.py"),
            "x",
            "abort,fine,abort",
            str(tmp_path / "r"),
            str(tmp_path / "res"),
            str(nbs),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    st = json.loads(out.stdout.splitlines()[-1])
    assert [s["status"] for s in st] == ["failed", "ok", "failed"], st
    assert all(s["error"].startswith("the kernel died: llama-vocab.cpp:") for s in st if s["status"] == "failed"), st
    assert "GGML_ASSERT" in (tmp_path / "r" / st[0]["log"]).read_text()
    assert os.stat(tmp_path / "res" / "abort" / "x.json").st_mtime == 0  # retried by the next make
    assert len(out.stderr.splitlines()) < 10, out.stderr[-2000:]  # no gdb flood
    assert VOCABS.exists()


@pytest.mark.slow
def test_a_worker_that_dies_ends_only_its_inputs_runs(tmp_path: Path) -> None:
    """The kernel kills the worker process that runs it: that input's runs go once more to a new
    worker, which dies too, so they fail, each saying so; the next input runs on a third worker.
    Each input's runs, failed or not, land in the folders its `where` gives (a what-if's two sides)."""
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    write_notebook(nbs, "killer", "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)")
    ok = (
        "import json, pathlib\np = pathlib.Path(results_dir) / 'fine' / (input['name'] + "
        "'.json')\np.parent.mkdir(parents=True, exist_ok=True)\np.write_text(json.dumps({'status': 'ok', 'notebook': "
        "'fine', 'vocab': input['name']}))"
    )
    write_notebook(nbs, "fine", ok)
    res = tmp_path / "res"
    said: list[str] = []
    statuses, starts = batch.run_pool(
        [("a", ["killer", "fine"]), ("b", ["fine"])],
        1,
        places=batch.Places(results=tmp_path / "pool-res", out_root=tmp_path / "pool-r", notebooks=nbs),
        say=said.append,
        where=[
            {"out": tmp_path / "ra", "results": tmp_path / "res-a", "params": {}},
            {"out": tmp_path / "r", "results": res, "params": {}},
        ],
    )
    got = {(s["vocab"], s["notebook"]): s for s in statuses}
    assert got["b", "fine"]["status"] == "ok", statuses
    for n in ("killer", "fine"):
        assert got["a", n]["status"] == "failed", statuses
        assert got["a", n]["error"] == "the worker process was lost (killed by SIGKILL, twice) before this run", (
            statuses
        )
        assert os.stat(tmp_path / "res-a" / n / "a.json").st_mtime == 0  # retried by the next make
    assert json.loads((res / "fine" / "b.json").read_text())["status"] == "ok"
    assert (tmp_path / "r" / "html" / "fine" / "b.html").exists()
    assert not (tmp_path / "pool-res").exists() and not (res / "killer").exists()
    assert len(starts) == 3 and len(said) == 3, (starts, said)


def _make(tmp_path: Path, flags: list[str], code: str) -> str:
    (tmp_path / "slots.py").write_text(code)
    # quoted: the venv may be in a folder whose path has a space
    (tmp_path / "Makefile").write_text(f"all:\n\t+@{shlex.quote(sys.executable)} slots.py\n")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS")}
    env["PYTHONPATH"] = str(ROOT / "lib")
    return subprocess.run(
        ["make", "-s", *flags], cwd=tmp_path, capture_output=True, text=True, env=env, check=True
    ).stdout


def test_the_pool_takes_makes_job_slots_and_gives_them_back(tmp_path: Path) -> None:
    """Under the real Make: -j3 lends two slots beyond the recipe's own, a plain make none, and
    -n runs nothing."""
    code = (
        "from llgbridge.jobserver import Jobserver, make_flags\ndry, jobs, flags = make_flags(); s = Jobserver(flags); "
        "u = s.usable; n = 0\nwhile s.take(): n += 1\ns.close(); t = Jobserver(flags); m = 0\nwhile t.take(): m += "
        "1\nt.close(); print(dry, jobs, u, n, m)"
    )
    assert _make(tmp_path, ["-j3"], code).split() == ["False", "3", "True", "2", "2"]  # given back: taken again
    assert _make(tmp_path, [], code).split() == ["False", "None", "False", "0", "0"]
    assert _make(tmp_path, ["-n"], code).splitlines()[-1].split()[0] == "True"


@pytest.mark.slow
def test_make_report_serial_and_j2_write_the_same_bytes(tmp_path: Path) -> None:
    """The real `make report` from empty results in a copy of the tree, with one worker and with
    two (Make's jobserver lending the second): the pages and tables are the same bytes, whichever
    worker ran which input in which order."""
    from llgbridge.measure import regen

    tree = regen.tree_copy(tmp_path)
    small = {
        "INPUTS": "VOCABS='llama-spm gpt-2 bert-bge' MATRIX_VOCABS= REAL_VOCABS= CORPUS_SAMPLE_VOCABS=",
        "ANALYSES": "census probe soundness",
    }
    kept = {}
    for jobs in (1, 2):
        r = regen.regenerate(tree, "small", jobs, tmp_path / f"j{jobs}.log", small)
        assert r.returncode == 0, (tmp_path / f"j{jobs}.log").read_text()[-3000:]
        assert len(r.runs) == 9 and len(r.pool["workers"]) == jobs, (r.runs, r.pool)
        kept[jobs] = tmp_path / f"reports-j{jobs}"
        (tree / "reports").rename(kept[jobs])
    n, differ = regen.compare(kept[1], kept[2])
    assert n >= 9 + 3 and differ == [], differ  # at least every run's page and every vocab's
