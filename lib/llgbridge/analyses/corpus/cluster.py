"""Run a list of independent jobs serially, on a local process pool, or on a Dask cluster.

    run_jobs(fn, jobs, engine="pool", workers=2)                  # one machine
    run_jobs(fn, jobs, engine="dask")                              # a dask.distributed LocalCluster
    run_jobs(fn, jobs, engine="dask", cluster="tcp://host:8786")   # a running Dask scheduler

`fn` must be a module-level function (it is sent to other processes by reference) that returns a
JSON-like value. Every job ends as one `Outcome`, in the order of `jobs`: its value, or a one-line
error. An exception inside `fn` is that job's error. A worker process that dies while running a
job (an abort or a segfault inside llama.cpp or llguidance) costs that job one attempt: it is run
once more on a fresh worker, and a second death is recorded as the job's error with the cause
(the signal or exit code, or Dask's `KilledWorker`), and the run goes on.

Why Dask rather than Ray: the jobs are coarse (about a second each), independent and few (a few
thousand), so any scheduler will do; Dask's is pure Python and pip-installable in seconds, runs
in-process as a `LocalCluster` for the tests, talks plain TCP to a scheduler started with
`dask scheduler` (so `CLUSTER=tcp://host:port` is the whole setup), and reports a worker death
per task (`KilledWorker`, with a configurable number of retries). Ray brings a large native
runtime (its own object store and control plane) for features this does not use.

The local engine is `pool.run`, the pool `make report`'s notebook workers run on: each worker runs
one job at a time, so a death is charged to the job it was running, and a worker that stops
answering is given up on like one that died.

But:
- on a real cluster the scheduler's own `distributed.scheduler.allowed-failures` (default 3) is
  applied before the one retry here, and its `worker-saturation` decides how many queued jobs a
  dying worker takes down with it (each is retried too); on the `LocalCluster` they are 0 and 1.0,
  so a job runs at most twice and only the job that killed its worker is charged;
- the workers of a real cluster need this package and its data at the same paths (the jobs name
  their input files); the results come back to the client, which alone writes files.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tqdm.auto import tqdm

from ... import pool
from ...errors import first_line
from ...pool import ATTEMPTS

ENGINES = ("serial", "pool", "dask")


@dataclass
class Outcome:
    value: Any = None
    error: str = ""  # one line; "" when the job succeeded
    attempts: int = 1

    @property
    def ok(self) -> bool:
        return not self.error


def _call(fn: Callable[[Any], Any], job: Any) -> tuple[str, Any]:
    """Run one job; an exception becomes its one-line error (only a dead worker escapes)."""
    try:
        return "ok", fn(job)
    except Exception as e:  # noqa: BLE001 - each job's failure is a result, not the run's
        return "error", f"{type(e).__name__}: {first_line(str(e))}"


def _outcome(res: tuple[str, Any], attempts: int) -> Outcome:
    kind, val = res
    return Outcome(value=val, attempts=attempts) if kind == "ok" else Outcome(error=str(val), attempts=attempts)


def run_jobs(
    fn: Callable[[Any], Any],
    jobs: Sequence[Any],
    engine: str = "serial",
    workers: int | None = None,
    cluster: str | None = None,
    desc: str = "jobs",
) -> list[Outcome]:
    """One `Outcome` per job, in order. `workers` defaults to the machine's CPU count."""
    if engine not in ENGINES:
        raise ValueError(f"engine {engine!r}: choose one of {', '.join(ENGINES)}")
    if not jobs:
        return []
    workers = max(1, workers or os.cpu_count() or 1)
    if engine == "serial":
        return [_outcome(_call(fn, j), 1) for j in tqdm(jobs, desc=desc, unit="job")]
    if engine == "pool":
        return _run_pool(fn, jobs, workers, desc)
    return _run_dask(fn, jobs, workers, cluster, desc)


# -- local pool ---------------------------------------------------------------------------------
@contextmanager
def _calls(fn: Callable[[Any], Any]) -> Iterator[Callable[[Any, Callable[[Any], None]], tuple[str, Any]]]:
    """What a pool worker runs: `fn` on each job it is handed."""
    yield lambda job, emit: _call(fn, job)


def _run_pool(fn: Callable[[Any], Any], jobs: Sequence[Any], workers: int, desc: str) -> list[Outcome]:
    out: list[Outcome | None] = [None] * len(jobs)
    with tqdm(total=len(jobs), desc=desc, unit="job") as bar:

        def done(i: int, res: tuple[str, Any], tries: int) -> None:
            out[i] = _outcome(res, tries)
            bar.update()

        def lost(i: int, cause: str, tries: int) -> None:
            why = "the worker died twice running it" if tries > 1 else "the worker was lost running it"
            out[i] = Outcome(error=f"{why} ({cause})", attempts=tries)
            bar.update()

        pool.run(jobs, _calls, (fn,), workers=min(workers, len(jobs)), on_done=done, on_lost=lost, attempts=ATTEMPTS)
    return [o for o in out if o is not None]


# -- Dask ---------------------------------------------------------------------------------------
def cluster_problem(address: str) -> str:
    """Why `address` is no address of a Dask scheduler this suite can reach, or "" when it is one:
    `tcp://HOST:PORT` (or `HOST:PORT`, which Dask reads as tcp). Dask's other schemes need what the
    suite does not set up (tls: certificates; ucx: UCX-Py; ws: a scheduler serving websockets), and
    an address without a port fails deep inside Dask, as a traceback."""
    scheme, sep, rest = address.rpartition("://")
    if sep and scheme != "tcp":
        return f"the scheme {scheme + sep!r} is not one the suite reaches a Dask scheduler by; give tcp://HOST:PORT"
    host, colon, port = rest.rpartition(":")
    if not colon:
        return "no port; a Dask scheduler's address is tcp://HOST:PORT"
    if not host.strip("[]") or "/" in rest:
        return "not HOST:PORT; a Dask scheduler's address is tcp://HOST:PORT"
    if not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
        return f"the port {port!r} is no port number (1 to 65535); give tcp://HOST:PORT"
    return ""


class BadAddress(ValueError):
    """A scheduler address `cluster_problem` refuses; `str()` is one line naming it."""


class NoWorkers(Exception):
    """The scheduler at `cluster` had no worker within the wait (`dask_client`'s `wait`)."""


def _connect(client_class: Any, cluster: str, wait: float | None) -> Any:
    """A client of the scheduler at `cluster`, or `NoWorkers` in one line. Something that accepts
    the connection but is no Dask scheduler (an HTTP server) never answers Dask's handshake, and
    the client's own timeout does not cover that wait: the connection is made in a thread given
    `wait` seconds (and a few more), and abandoned (a daemon thread) when it takes longer."""
    import threading

    got: dict[str, Any] = {}

    def connect() -> None:
        try:
            got["client"] = client_class(cluster, timeout=wait) if wait else client_class(cluster)
        except Exception as e:  # noqa: BLE001 - said in one line below, whatever the client raised
            got["error"] = e

    t = threading.Thread(target=connect, name="dask-connect", daemon=True)
    t.start()
    t.join(wait + 5 if wait else None)
    if "client" in got:
        return got["client"]
    if "error" in got:
        raise NoWorkers(f"no scheduler at {cluster} ({first_line(str(got['error']))})")
    raise NoWorkers(f"no Dask scheduler answered at {cluster} in {(wait or 0) + 5:.0f} s (is it one?)")


@contextmanager
def dask_client(workers: int, cluster: str | None = None, wait: float | None = None) -> Iterator[Any]:
    """A `distributed.Client`: to the scheduler at `cluster`, else to a fresh `LocalCluster` of
    `workers` single-threaded worker processes (llguidance and llama.cpp calls hold the GIL
    through their Python callbacks, so threads would not add throughput).

    With `wait`, a scheduler (or no scheduler at all) that has no worker after `wait` seconds
    raises `NoWorkers`, one line naming it, rather than holding the jobs until one joins."""
    import logging

    import dask
    from distributed import Client, LocalCluster

    if cluster:
        if why := cluster_problem(cluster):
            raise BadAddress(f"{cluster!r}: {why}")
        client = _connect(Client, cluster, wait)
        with client:
            if wait:
                try:
                    client.wait_for_workers(1, timeout=wait)
                except TimeoutError:
                    raise NoWorkers(f"no workers on {cluster} (none joined in {wait:.0f} s)") from None
            yield client
        return
    # a worker holds one task at a time (saturation 1.0: the queue stays on the scheduler), so a
    # worker's death is charged to the job it ran and not to jobs queued behind it; and the
    # scheduler gives up on that job at once, leaving the one retry to run_jobs
    with dask.config.set({"distributed.scheduler.allowed-failures": 0, "distributed.scheduler.worker-saturation": 1.0}):
        with (
            LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=logging.CRITICAL,
            ) as lc,
            Client(lc) as client,
        ):
            yield client


def _run_dask(
    fn: Callable[[Any], Any], jobs: Sequence[Any], workers: int, cluster: str | None, desc: str
) -> list[Outcome]:
    from distributed import as_completed
    from distributed.scheduler import KilledWorker

    out: list[Outcome | None] = [None] * len(jobs)
    attempts = [1] * len(jobs)
    token = os.urandom(4).hex()  # keys unique to this run, so a shared scheduler never hands back another run's task
    with dask_client(workers, cluster) as client:

        def submit(i: int) -> Any:
            return client.submit(_call, fn, jobs[i], key=f"{desc}-{token}-{i}-{attempts[i]}", pure=False, retries=0)

        index: dict[str, int] = {}
        first = []
        for i in range(len(jobs)):
            f = submit(i)
            index[f.key] = i
            first.append(f)
        ac = as_completed(first)
        del first  # as_completed holds them until each is read
        with tqdm(total=len(jobs), desc=desc, unit="job") as bar:
            for fut in ac:
                i = index[fut.key]
                try:
                    out[i] = _outcome(fut.result(), attempts[i])
                    bar.update()
                except KilledWorker as e:
                    if attempts[i] < ATTEMPTS:
                        attempts[i] += 1
                        nf = submit(i)
                        index[nf.key] = i
                        ac.add(nf)
                    else:
                        out[i] = Outcome(
                            error=f"the worker died twice running it (KilledWorker: {first_line(str(e))[:200]})",
                            attempts=attempts[i],
                        )
                        bar.update()
                fut.release()
    return [o for o in out if o is not None]
