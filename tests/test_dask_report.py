"""`make report CLUSTER=tcp://host:port` (`batch --cluster`, `llgbridge.remote`) on real processes:
a `dask scheduler` and two `dask worker`s on 127.0.0.1, free ports. The report's tables from the
cluster's run are the local pool's bytes, a worker killed mid-job (its pid, SIGKILL) costs its job
one retry and the job still ends ok, and a scheduler with no workers is one line, a non-zero exit
and nothing written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from llgbridge.paths import ROOT

# the scheduler retries nothing itself and a worker holds one job: the retry is the client's
ENV = {
    **{k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS")},
    "PYTHONPATH": str(ROOT / "lib"),
    "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0",
    "DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION": "1.0",
}
DASK = [sys.executable, "-m", "dask"]
BATCH = [
    sys.executable,
    "-m",
    "llgbridge.batch",
    "--inputs",
    "every=llama-spm gpt-2",
    "--analyses",
    "census",
    "leak",
    "forced",
    "probe",
]


def _start(started: list[subprocess.Popen[bytes]], args: list[str], log: Path) -> None:
    with log.open("wb") as f:
        started.append(
            subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT, env=ENV, cwd=log.parent, start_new_session=True)
        )


def _scheduler(started: list[subprocess.Popen[bytes]], folder: Path) -> Path:
    folder.mkdir()
    file = folder / "scheduler.json"
    _start(
        started,
        [*DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file", str(file)],
        folder / "scheduler.log",
    )
    return file


def _address(file: Path) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            return str(json.loads(file.read_text())["address"])
        except (OSError, ValueError, KeyError):
            time.sleep(0.2)
    raise AssertionError(f"no scheduler: {(file.parent / 'scheduler.log').read_text()[-2000:]}")


def _kill_a_busy_worker(client: object, batch: subprocess.Popen[str]) -> int:
    """The pid of a worker running one of the batch's jobs, killed a second into the job."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and batch.poll() is None:
        busy = [w for w, keys in client.processing().items() if any(str(k).startswith("batch-") for k in keys)]  # type: ignore[attr-defined]
        if busy:
            pid = int(client.run(os.getpid, workers=busy[:1])[busy[0]])  # type: ignore[attr-defined]
            time.sleep(1.0)
            os.kill(pid, signal.SIGKILL)
            return pid
        time.sleep(0.1)
    raise AssertionError("no job of the batch was seen running")


def _popen(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)


def _cluster(started: list[subprocess.Popen[bytes]], tmp_path: Path) -> tuple[Path, Path]:
    """A scheduler with two workers, and one with none: their scheduler files."""
    file, empty = _scheduler(started, tmp_path / "cluster"), _scheduler(started, tmp_path / "empty")
    for name in ("w1", "w2"):
        _start(
            started,
            [*DASK, "worker", "--scheduler-file", str(file), "--nthreads", "1", "--nworkers", "1", "--no-dashboard"]
            + ["--name", name, "--local-directory", str(tmp_path / name)],
            tmp_path / f"{name}.log",
        )
    return file, empty


def _on_the_cluster(address: str, tmp_path: Path) -> str:
    """The batch on the scheduler at `address`, one of its workers killed mid-job: its stdout."""
    from distributed import Client

    with Client(address, timeout=30) as client:
        client.wait_for_workers(2, timeout=60)
        batch = _popen(
            [*BATCH, "--results", str(tmp_path / "dask"), "--out", str(tmp_path / "dask-out")] + ["--cluster", address]
        )
        killed = _kill_a_busy_worker(client, batch)
        out, err = batch.communicate(timeout=240)
    assert batch.returncode == 0, out[-3000:] + err[-3000:]
    print(f"killed worker pid {killed}; {next((x for x in out.splitlines() if 'once more' in x), '')}")
    return out


def _same_tables(tmp_path: Path) -> None:
    """Both results rendered (`llgbridge.report`): the tables are the same bytes."""
    renders = {
        side: _popen(
            [sys.executable, "-m", "llgbridge.report", "--results", str(tmp_path / side)]
            + ["--out", str(tmp_path / f"{side}-out")]
        )
        for side in ("local", "dask")
    }
    codes = {side: (p.wait(120), p.communicate()) for side, p in renders.items()}
    assert codes["local"][0] == codes["dask"][0], codes
    tables = sorted(p.name for p in (tmp_path / "local-out" / "tables").glob("*.csv"))
    assert {"census.csv", "leak.csv", "forced.csv", "probe.csv"} <= set(tables), tables
    for name in tables:
        a = (tmp_path / "local-out" / "tables" / name).read_bytes()
        assert a == (tmp_path / "dask-out" / "tables" / name).read_bytes(), name


def test_make_report_on_a_dask_scheduler_gives_the_local_tables_and_retries_a_killed_worker_once(
    tmp_path: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    t0 = time.monotonic()
    file, empty = _cluster(started, tmp_path)
    # a scheduler no worker joins: one line, exit 1, nothing written (while the local pool runs)
    lonely = _address(empty)
    none = _popen(
        [*BATCH, "--results", str(tmp_path / "none"), "--out", str(tmp_path / "none-out")]
        + ["--cluster", lonely, "--cluster-wait", "3"]
    )
    local = subprocess.run(
        [*BATCH, "--results", str(tmp_path / "local"), "--out", str(tmp_path / "local-out")],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=ROOT,
        timeout=300,
    )
    assert local.returncode == 0, local.stderr[-2000:]
    _, err = none.communicate(timeout=120)
    assert none.returncode == 1
    assert err.splitlines() == [f"batch: no workers on {lonely} (none joined in 3 s); nothing was run"], err
    assert not (tmp_path / "none").exists() and not (tmp_path / "none-out").exists()

    out = _on_the_cluster(_address(file), tmp_path)
    again = [line for line in out.splitlines() if "once more" in line]
    assert len(again) == 1 and "KilledWorker" in again[0], out
    assert sum(" ok in " in line for line in out.splitlines()) == 8 and "FAILED" not in out, out
    timing = json.loads((tmp_path / "dask" / ".timing" / "pool.json").read_text())
    assert (timing["engine"], timing["retries"], timing["runs"], timing["failed"]) == ("dask", 1, 8, 0), timing
    assert (tmp_path / "dask-out" / "html" / "census" / "gpt-2.html").is_file()
    _same_tables(tmp_path)
    print(f"the whole test: {time.monotonic() - t0:.1f} s")


def test_on_a_gpu_run_the_matrix_and_server_runs_are_jobs_that_ask_for_a_gpu_worker() -> None:
    from llgbridge.remote import split

    jobs = [("llama-spm", ["census", "matrix", "server"]), ("gpt-2", ["census"])]
    got = [(j.vocab, j.analyses, j.gpu) for j in split(jobs, gpu=True)]
    assert got == [
        ("llama-spm", ["matrix", "server"], True),
        ("llama-spm", ["census"], False),
        ("gpt-2", ["census"], False),
    ]
    # a CPU run asks for nothing: a CPU-only cluster runs them, an input's analyses in one job
    assert [(j.vocab, j.analyses, j.gpu) for j in split(jobs, gpu=False)] == [(v, a, False) for v, a in jobs]
