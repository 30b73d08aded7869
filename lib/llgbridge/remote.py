"""`make report CLUSTER=tcp://host:port`: the report's (analysis, input) runs on a Dask scheduler.

    python -m llgbridge.batch --inputs every="V1 V2" ... --cluster tcp://host:8786

The same jobs as the local pool's (`batch.run_pool`: one input's analyses each, the largest
first), each one Dask task (`run_job`) that runs them the way a pool worker does (`run.Worker`, a
kernel of its own for the task) into a temporary folder on the worker, and returns what they
wrote: the results, their timing, the executed notebooks, their pages and a failed run's log. The
client alone writes files, the same ones a local run writes, so `results.load` and the page cannot
tell which ran them.

The promises are the pool's:
- a crash inside native code ends its run only (the kernel dies, not the worker: a failed result);
- a worker process that dies while it runs a job (Dask's `KilledWorker`) costs that job one retry,
  on a fresh worker; a second death fails its runs with one line naming the cause, and the others
  go on;
- a worker that stops answering (the scheduler hears no heartbeat from it for `pool.STALL`
  seconds: stopped with SIGSTOP, or wedged holding the GIL, the same bound and the same cases as a
  local worker's) is given up on: its job is cancelled, its process killed through its nanny, and
  the job counts one loss like a death. A cell that runs too long is the kernel's own time limit
  (`run.CELL_TIMEOUT`), as it is locally;
- no workers on the scheduler: one line, exit 1, nothing written (`WORKER_WAIT`).

A Dask scheduler retries a task whose worker died `distributed.scheduler.allowed-failures` times
(default 3) before the client hears of it: start it with
`DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES=0` and `..._WORKER_SATURATION=1.0` (a worker holds
one job, so a death is charged to the job it ran), and the one retry here is the only one; the
client says so in one line when the scheduler's setting differs. Workers are best started with
`--nthreads 1` (a job uses a core, and its kernel another); a worker with more threads runs its
jobs one at a time anyway (`_ONE_AT_A_TIME`: a job sends the process's stdout to its kernel's log).

The model matrix and the real llama-server, when `N_GPU_LAYERS` asks for layers on a GPU, ask
Dask for the worker resource `GPU` (`resources={"GPU": 1}`): only workers started with
`--resources GPU=1` take them, one at a time each, so on a mixed cluster the CPU workers run the
rest. On a CPU run they ask for nothing, and a CPU-only cluster runs them. The workers need this
package, its data and its native builds at the same paths as the client (the jobs name inputs by
name), and `N_GPU_LAYERS` travels with each job.
"""

from __future__ import annotations

import json
import os
import resource
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import params as P
from . import pool
from .analyses import BY_NAME
from .analyses.corpus.cluster import BadAddress, NoWorkers, cluster_problem, dask_client
from .errors import InputError, first_line
from .paths import write_atomic
from .results import code_version
from .run import RunStatus, Worker, env_error, fast_imports, shown_results, status_line, write_failed

WORKER_WAIT = 30.0  # seconds the client waits for a first worker before it gives up
POLL = 0.5  # seconds between the client's looks at its jobs
_ONE_AT_A_TIME = threading.Lock()


# -- on the worker ----------------------------------------------------------------------------------
def _files(folder: Path, replace: list[tuple[str, str]]) -> dict[str, bytes]:
    """Every file under `folder` by its relative path, each of `replace`'s texts replaced in it
    (the worker's temporary folders, as the client's run would have named them)."""
    out: dict[str, bytes] = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            for old, new in replace:
                data = data.replace(old.encode(), new.encode())
            out[str(p.relative_to(folder))] = data
    return out


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """One input's analyses, on a Dask worker, as a pool worker runs them (`batch.notebook_worker`),
    into a temporary folder: what they wrote comes back to the client (`results`, `reports`: path
    -> bytes) with each run's status. Nothing stays on the worker."""
    fast_imports()
    with _ONE_AT_A_TIME, tempfile.TemporaryDirectory(prefix="llgbridge-job-", dir=_scratch()) as tmp:
        results, out = Path(tmp) / "results", Path(tmp) / "reports"
        statuses: list[RunStatus] = []
        saved = {k: os.environ.get(k) for k in (*job["env"], "MAKEFLAGS")}
        # the Worker bounds its host's address space so that its kernels inherit the bound: here the
        # host is the long-lived Dask worker, whose own bound is given back after the job
        limit = resource.getrlimit(resource.RLIMIT_AS)
        os.environ.update(job["env"], MAKEFLAGS="")  # the kernel inherits it; it runs no Make
        try:
            with Worker(out, results, progress=False) as w:
                try:
                    w.run_vocab(job["vocab"], job["analyses"], None, on_status=statuses.append)
                except InputError as e:
                    statuses = [_failed(a, job["vocab"], str(e)) for a in job["analyses"]]
        finally:
            resource.setrlimit(resource.RLIMIT_AS, limit)
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        replace = [(str(results), job["shown_results"]), (str(out) + "/", "")]
        return {
            "statuses": statuses,
            "results": _files(results, replace),
            "reports": _files(out, replace),
            "pid": os.getpid(),
        }


def _scratch() -> str | None:
    """The worker's own folder (Dask clears a dead worker's), else the system's temporary one."""
    try:
        from distributed import get_worker

        return str(get_worker().local_directory)
    except (ImportError, ValueError):
        return None


def _failed(analysis: str, vocab: str, error: str) -> RunStatus:
    return {"notebook": analysis, "vocab": vocab, "status": "failed", "error": error}


# -- on the client ----------------------------------------------------------------------------------
@dataclass
class Job:
    """One task's input and analyses, and what it has cost so far."""

    vocab: str
    analyses: list[str]
    gpu: bool
    attempts: int = 0
    future: Any = None


@dataclass
class Outcome:
    statuses: list[RunStatus] = field(default_factory=list)
    retries: int = 0


def split(jobs: list[tuple[str, list[str]]], gpu: bool) -> list[Job]:
    """The pool's jobs as tasks: when `gpu`, an input's matrix and server runs are a task of their
    own that asks for a GPU worker, and its other analyses one that asks for nothing."""
    out: list[Job] = []
    for vocab, analyses in jobs:
        on_gpu = [a for a in analyses if gpu and BY_NAME[a].gpu]
        rest = [a for a in analyses if a not in on_gpu]
        out += [Job(vocab, x, x is on_gpu) for x in (on_gpu, rest) if x]
    return out


def other_code(results: dict[str, bytes]) -> dict[str, str]:
    """The analyses whose results a worker computed with other code than this client's (another
    checkout, or this one before an edit), each with its one line: written here, such a result would
    be stale at once, and every rerun on the same workers would loop the same way."""
    out: dict[str, str] = {}
    for rel, data in results.items():
        analysis = rel.split("/", 1)[0]
        try:
            recorded = json.loads(data).get("provenance", {}).get("code", "")
        except (ValueError, AttributeError):
            continue  # a result the worker could not write whole: its status says why
        if recorded and recorded != code_version(analysis):
            out[analysis] = (
                f"the worker ran other code than this client ({analysis}: its code {recorded}, here "
                f"{code_version(analysis)}): start the workers from this checkout, as it is now"
            )
    return out


class Client:
    """One batch on one scheduler: submit each job, collect each one's files, retry a lost one once."""

    def __init__(self, client: Any, results: Path, out_root: Path, say: Callable[[str], None], stall: float) -> None:
        self.client, self.results, self.out_root, self.say, self.stall = client, results, out_root, say, stall
        self.token = os.urandom(4).hex()  # this run's keys: a shared scheduler never hands back another's
        self.env = {"N_GPU_LAYERS": os.environ.get("N_GPU_LAYERS", "")}
        self.outcome = Outcome()
        self.total = 0
        self.seen: dict[str, tuple[float, float]] = {}  # worker -> (its last heartbeat, when that changed here)

    def submit(self, i: int, job: Job) -> None:
        job.attempts += 1
        payload = {
            "vocab": job.vocab,
            "analyses": job.analyses,
            "shown_results": shown_results(self.results),
            "env": self.env,
        }
        job.future = self.client.submit(
            run_job,
            payload,
            key=f"batch-{self.token}-{i}-{job.attempts}",
            pure=False,
            retries=0,
            priority=-i,  # the largest input first, as the local pool takes them
            resources={"GPU": 1} if job.gpu else None,
        )

    def run(self, jobs: list[Job]) -> Outcome:
        self.total = sum(len(j.analyses) for j in jobs)
        if any(j.gpu for j in jobs) and not self._gpu_workers():
            for j in [j for j in jobs if j.gpu]:
                self.lose(j, "no worker on the scheduler offers the GPU resource (dask worker --resources GPU=1)")
                jobs.remove(j)
        for i, j in enumerate(jobs):
            self.submit(i, j)
        pending = dict(enumerate(jobs))
        last = 0.0
        while pending:
            for i, j in [(i, j) for i, j in pending.items() if j.future.done()]:
                if self.collect(i, j):
                    del pending[i]
            if pending and time.monotonic() - last > pool.HEARTBEAT:
                last = time.monotonic()
                for i, j in self.stalled(pending):
                    if self.retry(i, j, f"stopped answering for {self.stall:.0f} s, then killed"):
                        del pending[i]
            time.sleep(POLL if pending else 0)
        return self.outcome

    def collect(self, i: int, j: Job) -> bool:
        """Job `j`'s end: its files written, or (its worker died) run once more; True when it is over."""
        from distributed.scheduler import KilledWorker

        fut = j.future
        try:
            value = fut.result()
        except KilledWorker as e:
            return self.retry(i, j, f"KilledWorker: {first_line(str(e)).split('. ')[0][:200]}")
        except Exception as e:  # noqa: BLE001 - the scheduler gone, the task cancelled: this job's failure
            self.lose(j, f"{type(e).__name__}: {first_line(str(e))[:200]}")
            return True
        finally:
            fut.release()
        self.write(value)
        return True

    def retry(self, i: int, j: Job, cause: str) -> bool:
        """A lost worker: the job once more on another; lost again, its runs fail. True when it is over."""
        if j.attempts < pool.ATTEMPTS:
            self.say(f"[{j.vocab}] the worker was lost running it ({cause}): its {len(j.analyses)} run(s) once more")
            self.outcome.retries += 1
            self.submit(i, j)
            return False
        self.lose(j, f"the worker process was lost ({cause}, twice) before this run")
        return True

    def lose(self, j: Job, why: str) -> None:
        for a in j.analyses:
            st = _failed(a, j.vocab, why)
            try:
                write_failed(self.results / a / f"{j.vocab}.json", st, None)
            except OSError as e:
                st["unwritten"] = env_error(e)
            self.said(st)

    def write(self, value: dict[str, Any]) -> None:
        """A job's files, as the worker wrote them, into the client's folders, then each run's line;
        a failed result dated 1970, as a local run dates it."""
        statuses: list[RunStatus] = value["statuses"]
        other = other_code(value["results"])
        try:
            for folder, key in ((self.results, "results"), (self.out_root, "reports")):
                for rel, data in value[key].items():
                    # a result of other code is never written as this checkout's: a failed one is, below
                    if key != "results" or rel.split("/", 1)[0] not in other:
                        write_atomic(folder / rel, data)
            for st in statuses:
                self._close(st, other.get(st["notebook"], ""))
        except OSError as e:
            for st in statuses:
                st["status"], st["error"], st["unwritten"] = "failed", env_error(e), env_error(e)
        for st in statuses:
            self.said(st)

    def _close(self, st: RunStatus, other: str) -> None:
        """A run's result file as its status says: failed for other code (its line), dated 1970 if failed."""
        path = self.results / st["notebook"] / f"{st['vocab']}.json"
        if other:
            st["status"], st["error"] = "failed", other
            write_failed(path, st, None)
        if st["status"] != "ok":
            os.utime(path, (0, 0))

    def said(self, st: RunStatus) -> None:
        self.outcome.statuses.append(st)
        self.say(f"{status_line(st)}  ({len(self.outcome.statuses)}/{self.total})")

    def _gpu_workers(self) -> bool:
        workers = self.client.scheduler_info(n_workers=-1)["workers"].values()
        return any(w.get("resources", {}).get("GPU", 0) >= 1 for w in workers)

    def stalled(self, pending: dict[int, Job]) -> list[tuple[int, Job]]:
        """The jobs on a worker the scheduler has heard nothing from for `stall` seconds (its heartbeat
        unchanged, by this process's clock): cancelled, that worker killed and started again by its nanny
        (one without a nanny is left to the scheduler's `worker-ttl`)."""
        now = time.monotonic()
        info = self.client.scheduler_info(n_workers=-1)["workers"]
        processing = self.client.processing()
        out = []
        for addr, w in info.items():
            beat = float(w.get("last_seen", 0))
            if self.seen.get(addr, (None, 0.0))[0] != beat:
                self.seen[addr] = (beat, now)
            keys = set(processing.get(addr, ()))
            mine = [(i, j) for i, j in pending.items() if j.future.key in keys]
            if mine and now - self.seen[addr][1] > self.stall:
                for _, j in mine:
                    j.future.cancel()
                if w.get("nanny"):  # its nanny kills it (SIGKILL past the timeout) and starts another
                    self.client.restart_workers([addr], timeout=30, raise_for_error=False)
                self.seen.pop(addr, None)
                out += mine
        return out


def allowed_failures(client: Any) -> int | None:
    """The scheduler's own retries of a task whose worker died, or None when it does not say."""
    try:
        import dask

        return int(client.run_on_scheduler(dask.config.get, "distributed.scheduler.allowed-failures"))
    except Exception:  # noqa: BLE001 - a scheduler that refuses to run it: nothing to say
        return None


def run_cluster(
    jobs: list[tuple[str, list[str]]],
    cluster: str,
    results: Path,
    out_root: Path,
    say: Callable[[str], None] = print,
    stall: float = pool.STALL,
    wait: float = WORKER_WAIT,
) -> Outcome:
    """Run `jobs` ((input, its analyses), in order) on the Dask scheduler at `cluster`, writing
    their files into `results` and `out_root` here. Raises `NoWorkers` when no worker joined in
    `wait` seconds, before anything is written."""
    with dask_client(1, cluster, wait=wait) as client:
        n = allowed_failures(client)
        if n:
            say(
                f"note: the scheduler retries a job whose worker died {n} time(s) before this client's one retry "
                "(start it with DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES=0)"
            )
        return Client(client, results, out_root, say, stall).run(split(jobs, P.gpu_layers(0) != 0))


__all__ = ["run_job", "run_cluster", "split", "NoWorkers", "BadAddress", "cluster_problem"]
