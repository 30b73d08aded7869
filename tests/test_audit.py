"""`make audit` (issue 60): a folder of files, each checked at the edge, each a what-if of its own,
one summary row per file; the same file runs once, a rerun only what is new, and a Dask scheduler
gives the same summary byte for byte.

The folder: three fixtures (llama-spm, bert-bge, phi-3), llama-spm with `add_space_prefix` written
into the file as false (a GGUF edited with gguf-py, as tests/helpers.py writes them), and a
truncated file. Each summary row is checked against its file's own what-if tables, read with the
csv module; llama-spm's against the guide (4.3: 16410 tokens with wrong bytes)."""

from __future__ import annotations

import csv
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_dask_report import ENV, _address, _cluster

from llgbridge import audit
from llgbridge.paths import VOCABS

ANALYSES = ("census", "leak", "forced", "probe")
FIXTURES = ("llama-spm", "bert-bge", "phi-3")
OPTS = audit.Options(names=ANALYSES)


def no_space_prefix(path: Path) -> Path:
    """llama-spm's tokenizer with `tokenizer.ggml.add_space_prefix` = false written into the file."""
    import gguf

    from llgbridge.synth import _tokenizer_kv

    w = gguf.GGUFWriter(str(path), "llama")
    for k, (value, vtype, sub) in _tokenizer_kv(VOCABS / "ggml-vocab-llama-spm.gguf").items():
        w.add_key_value(k, value, vtype, sub)
    w.add_bool("tokenizer.ggml.add_space_prefix", False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("audit") / "models"
    d.mkdir()
    for v in FIXTURES:
        shutil.copy(VOCABS / f"ggml-vocab-{v}.gguf", d / f"{v}.gguf")
    no_space_prefix(d / "spm-no-prefix.gguf")
    (d / "cut.gguf").write_bytes((VOCABS / "ggml-vocab-deepseek-coder.gguf").read_bytes()[:5000])
    return d


@pytest.fixture(scope="module")
def first(folder: Path) -> tuple[audit.Audit, Path]:
    out = folder.parent / "report"
    return audit.audit([str(folder)], "t", OPTS, out=out, say=lambda _: None), out


def table(out: Path, page: str, name: str) -> list[dict[str, str]]:
    with (out / Path(page).parent / "tables" / f"{name}.csv").open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def summary(out: Path) -> list[dict[str, str]]:
    with (out / "summary.csv").open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def test_every_file_has_its_row_and_the_rows_are_its_whatifs(first: tuple[audit.Audit, Path], folder: Path) -> None:
    got, out = first
    rows = {Path(r["file"]).name: r for r in summary(out)}
    assert sorted(rows) == sorted([*(f"{v}.gguf" for v in FIXTURES), "spm-no-prefix.gguf", "cut.gguf"])
    assert sorted(got.ran) == sorted({r["page"].split("/")[1] for n, r in rows.items() if n != "cut.gguf"})
    for n, r in rows.items():
        if n == "cut.gguf":
            continue
        assert r["status"] == "ok", r
        census = table(out, r["page"], "census")[0]
        leak = {x["bridge"]: x for x in table(out, r["page"], "leak")}
        forced = {x["bridge"]: x for x in table(out, r["page"], "forced")}
        assert r["a_tokens"] == census["differing"], n
        assert [r["a_upstream"], r["a_fixed"]] == [
            leak["upstream"]["allowed_illegal"],
            leak["fixed"]["allowed_illegal"],
        ]
        for b in ("upstream", "fixed"):
            broke = forced[b]["error"] or forced[b]["not_prefix"] != "0" or forced[b]["output_ok"] == "False"
            assert (r[f"b_{b}"] != "no") == bool(broke), (n, b, r[f"b_{b}"], forced[b])
        # the what-if's page is there, and the server, not run here, is said not run
        assert (out / r["page"]).exists() and r["server_on"] == "not run"
    # the guide's 4.3 on llama-spm; the key written into the file takes most of bug A away, as its override does
    assert rows["llama-spm.gguf"]["a_tokens"] == "16410"
    assert int(rows["spm-no-prefix.gguf"]["a_tokens"]) < 16410
    assert "the file's key false" in rows["spm-no-prefix.gguf"]["add_space_prefix"]
    assert rows["llama-spm.gguf"]["b_upstream"] != "no" and rows["llama-spm.gguf"]["b_fixed"] == "no"


def test_a_truncated_file_is_one_line_and_the_others_go_on(first: tuple[audit.Audit, Path]) -> None:
    got, out = first
    (cut,) = [r for r in summary(out) if r["file"].endswith("cut.gguf")]
    assert cut["status"].startswith("refused: truncated GGUF") and "\n" not in cut["status"], cut
    assert not cut["page"]
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "truncated GGUF" in page.split('id="refused"', 1)[1]
    assert [r["file"] for r in got.failed] == [cut["file"]]


def test_a_rerun_runs_only_the_new_file_and_a_second_name_runs_nothing(
    first: tuple[audit.Audit, Path], folder: Path
) -> None:
    _, out = first
    # the new file's name is markup: the summary says it as text
    shutil.copy(VOCABS / "ggml-vocab-deepseek-coder.gguf", folder / "new <b>&.gguf")
    shutil.copy(folder / "llama-spm.gguf", folder / "llama-spm-again.gguf")
    lines: list[str] = []
    try:
        again = audit.audit([str(folder)], "t", OPTS, out=out, say=lines.append)
    finally:
        (folder / "new <b>&.gguf").unlink()
        (folder / "llama-spm-again.gguf").unlink()
    rows = {Path(r["file"]).name: r for r in again.rows}
    assert again.ran == [rows["new <b>&.gguf"]["page"].split("/")[1]], again.ran
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "new &lt;b&gt;&amp;.gguf" in page and "<b>&" not in page
    assert rows["llama-spm-again.gguf"]["page"] == rows["llama-spm.gguf"]["page"]
    assert {k: v for k, v in rows["llama-spm-again.gguf"].items() if k != "file"} == {
        k: v for k, v in rows["llama-spm.gguf"].items() if k != "file"
    }
    # a progress line per finished file, with the count
    assert [x for x in lines if x.startswith("[audit 1/1]")], lines


def test_a_dask_scheduler_gives_the_same_summary_byte_for_byte(first: tuple[audit.Audit, Path], folder: Path) -> None:
    """The same folder on a local Dask scheduler of two workers: each file's what-if runs on a worker
    and comes back to the client, which writes; the summary is the local run's, byte for byte."""
    _, out = first
    # the local summary of this folder as it is now (an earlier test added files and took them away): nothing runs
    assert audit.audit([str(folder)], "t", OPTS, out=out, say=lambda _: None).ran == []
    other = folder.parent / "dask"
    got = audit.audit(
        [str(folder)], "t", audit.Options(names=ANALYSES, cluster="local:2"), out=other, say=lambda _: None
    )
    assert len(got.ran) == 4
    assert (other / "summary.csv").read_bytes() == (out / "summary.csv").read_bytes()
    assert (other / "index.html").read_bytes() == (out / "index.html").read_bytes()


def _kill_a_busy_worker(client: Any, run: subprocess.Popen[str]) -> int:
    """The pid of a worker running one of the audit's files, killed a second into it."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and run.poll() is None:
        busy = [w for w, keys in client.processing().items() if any(str(k).startswith("audit-") for k in keys)]
        if busy:
            pid = int(client.run(os.getpid, workers=busy[:1])[busy[0]])
            time.sleep(1.0)
            os.kill(pid, signal.SIGKILL)
            return pid
        time.sleep(0.1)
    raise AssertionError("no file of the audit was seen running")


def test_on_a_real_scheduler_a_killed_worker_costs_its_file_one_retry(
    tmp_path: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    """`make audit CLUSTER=tcp://...` on a `dask scheduler` with two `dask worker`s (real processes,
    started as tests/test_dask_report.py starts them), one worker killed (SIGKILL) a second into a
    file's what-if: that file runs once more, the audit ends ok, and its summary is the local run's
    bytes."""
    from distributed import Client

    d = tmp_path / "models"
    d.mkdir()
    for v in ("llama-spm", "bert-bge"):
        shutil.copy(VOCABS / f"ggml-vocab-{v}.gguf", d / f"{v}.gguf")
    args = [sys.executable, "-m", "llgbridge.audit", "--analyses", "census probe", str(d)]
    local = subprocess.run([*args, "--out", str(tmp_path / "local")], capture_output=True, text=True, env=ENV)
    assert local.returncode == 0, local.stderr[-2000:]
    file, _ = _cluster(started, tmp_path)
    with Client(_address(file), timeout=30) as client:
        client.wait_for_workers(2, timeout=60)
        run = subprocess.Popen(
            [*args, "--out", str(tmp_path / "dask"), "--cluster", _address(file)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
        )
        _kill_a_busy_worker(client, run)
        out, err = run.communicate(timeout=600)
    assert run.returncode == 0, out[-3000:] + err[-3000:]
    assert "once more, on another" in out, out[-3000:]
    assert (tmp_path / "dask" / "summary.csv").read_bytes() == (tmp_path / "local" / "summary.csv").read_bytes()
