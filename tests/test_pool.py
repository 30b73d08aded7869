"""The one crash-isolating pool (`llgbridge.pool`) that `make report`'s notebook workers and the
corpus's local engine both run on: a worker that stops answering is given up on in bounded time,
the way one that dies is (issue 24, item 11), and its job alone pays for it."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from llgbridge import batch, pool


@contextmanager
def stopper() -> Iterator[Callable[[Any, Callable[[Any], None]], Any]]:
    """A job that stops its own worker (SIGSTOP) the first time it runs, as `kill -STOP` would."""

    def handle(job: tuple[str, str], emit: Callable[[Any], None]) -> str:
        kind, marker = job
        if kind == "stop" and not Path(marker).exists():
            Path(marker).write_text("stopped once")
            os.kill(os.getpid(), signal.SIGSTOP)
        return kind

    yield handle


def test_a_stopped_worker_is_killed_in_bounded_time_and_its_job_alone_runs_again(tmp_path: Path) -> None:
    done: dict[int, tuple[Any, int]] = {}
    lost: dict[int, str] = {}
    t0 = time.monotonic()
    pool.run(
        [("ok", ""), ("stop", str(tmp_path / "m")), ("ok", "")],
        stopper,
        workers=2,
        stall=3,
        heartbeat=0.5,
        on_done=lambda i, v, n: done.__setitem__(i, (v, n)),
        on_lost=lambda i, why, n: lost.__setitem__(i, why),
    )
    # without a stall limit this never returns: nothing is printed for as long as the worker stays stopped
    assert time.monotonic() - t0 < 60
    assert lost == {} and done == {0: ("ok", 1), 1: ("stop", 2), 2: ("ok", 1)}


@contextmanager
def always_stops() -> Iterator[Callable[[Any, Callable[[Any], None]], Any]]:
    def handle(job: str, emit: Callable[[Any], None]) -> str:
        if job == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
        return job

    yield handle


def test_a_job_that_stops_every_worker_is_lost_twice_naming_the_stall() -> None:
    done: dict[int, Any] = {}
    lost: dict[int, tuple[str, int]] = {}
    pool.run(
        ["stop", "ok"],
        always_stops,
        workers=1,
        stall=2,
        heartbeat=0.5,
        on_done=lambda i, v, n: done.__setitem__(i, v),
        on_lost=lambda i, why, n: lost.__setitem__(i, (why, n)),
    )
    assert done == {1: "ok"}
    assert lost == {0: ("stopped answering for 2 s, then killed", 2)}


@pytest.mark.slow
def test_a_stopped_notebook_worker_costs_its_input_one_retry(tmp_path: Path) -> None:
    """`kill -STOP` on a `make report` worker mid-input: within the stall limit the worker is killed,
    the input's runs go to a fresh worker, and nothing of the stopped one (its kernel) is left."""
    from helpers import write_notebook as _notebook

    nbs = tmp_path / "nbs"
    nbs.mkdir()
    marker = tmp_path / "stopped"
    _notebook(
        nbs,
        "stopper",
        f"import os, pathlib, signal\nm = pathlib.Path({str(marker)!r})\nif not m.exists():\n    "
        f"m.write_text(str(os.getppid()))\n    os.kill(os.getppid(), signal.SIGSTOP)\nimport json\np = "
        f"pathlib.Path(results_dir) / 'stopper' / (input['name'] + '.json')\np.parent.mkdir(parents=True, "
        f"exist_ok=True)\np.write_text(json.dumps({{'status': 'ok', 'notebook': 'stopper', 'vocab': input['name']}}))",
    )
    said: list[str] = []
    statuses, starts = batch.run_pool(
        [("a", ["stopper"])],
        1,
        places=batch.Places(results=tmp_path / "res", out_root=tmp_path / "r", notebooks=nbs),
        say=said.append,
        stall=5,
    )
    assert [(s["vocab"], s["notebook"], s["status"]) for s in statuses] == [("a", "stopper", "ok")], statuses
    assert len(starts) == 2, starts
    stopped = int(marker.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(stopped, 0)


CTRL_C_PARENT = """
import json, os, signal, sys
from pathlib import Path
from llgbridge import batch
if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a parent that ignores Ctrl-C: its workers must not die of it
    os.environ["CTRL_C_GROUP"] = str(os.getpgrp())  # the group the notebooks signal, through the workers' environment
    tmp = Path(sys.argv[1])
    places = batch.Places(results=tmp / "res", out_root=tmp / "r", notebooks=tmp / "nbs")
    statuses, starts = batch.run_pool([("a", ["first", "second"])], 1, places=places, say=lambda _: None)
    print(json.dumps([[s["notebook"], s["status"], s.get("error", "")] for s in statuses] + [len(starts)]))
"""


@pytest.mark.slow
def test_ctrl_c_at_the_terminal_is_not_recorded_as_a_crash(tmp_path: Path) -> None:
    """Ctrl-C at the terminal sends SIGINT to the whole foreground process group, `make`'s, which the
    pool's workers were in: nbclient's own handler killed the kernel mid-notebook and the run was
    recorded as "the kernel died (a crash inside native code)" (with a parent that ignores SIGINT,
    published as such). Here each of two notebooks sends SIGINT to its pool's process group, as the
    terminal would, and both finish as if nothing happened, on one worker."""
    import subprocess
    import sys

    from helpers import write_notebook as _notebook

    nbs = tmp_path / "nbs"
    nbs.mkdir()
    code = (
        "import json, os, pathlib, signal, time\nos.killpg(int(os.environ['CTRL_C_GROUP']), "
        "signal.SIGINT)\ntime.sleep(1.5)\np = pathlib.Path(results_dir) / NAME / (input['name'] + "
        "'.json')\np.parent.mkdir(parents=True, exist_ok=True)\np.write_text(json.dumps({'status': 'ok', 'notebook': "
        "NAME, 'vocab': input['name']}))"
    )
    for name in ("first", "second"):
        _notebook(nbs, name, f"NAME = {name!r}\n" + code)
    script = tmp_path / "parent.py"
    script.write_text(CTRL_C_PARENT)
    # the parent leads a process group of its own, as `make` leads the terminal's
    proc = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
        cwd=Path(__file__).parents[1],
    )
    out, _ = proc.communicate(timeout=300)
    assert json.loads(out.strip().splitlines()[-1]) == [["first", "ok", ""], ["second", "ok", ""], 1]
