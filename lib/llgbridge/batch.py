"""Run every out-of-date (analysis, input) of the report on a small pool of long-lived workers.

    python -m llgbridge.batch --vocabs V1 V2 ... --analyses census leak ... \\
        [--also matrix=V1,V2] [--also corpus=V1,V2] [--workers N] [--stamp PATH]

This is what `make report` runs for every per-input analysis, once. Make keeps the dependency
graph: one target, out of date when any file the analyses depend on changed (`CORE`, each
analysis's notebook and `MODULES`, the fixtures, the models, the native build). This module then
decides which (analysis, input) runs must really run, from what each result records
(`results.provenance`): a result is current when it is `ok`, matches its schema, was made with
the default parameters by the code that is there now (`results.code_version`) from the same input
file. So editing one analysis reruns only its runs, and editing the report, its templates or the
pipeline reruns none.

The runs go to workers (`run.Worker`, one process and one kernel each), an input at a time, the
largest first: a worker keeps its interpreter, imports and kernel from one input to the next, and
an input's analyses share its vocab and bridges. A crash inside native code ends only its own run
(the kernel is started again for the next); a worker that dies ends its input's remaining runs,
each a failed result naming the cause, and the others go on.

How many workers: under `make -jN`, as many as Make's job slots allow, taken and given back
through Make's jobserver while the pool runs (the recipe is marked `+` so Make hands the slots
over), so `-j2` runs two at a time beside whatever else Make runs; a plain `make` runs one. Under
`make -n` (or -q, -t) it prints what it would run and why, and runs nothing.

Make runs this on every `make report` (its target is FORCEd: mtimes cannot tell a deleted result
or a file copied in with its old date), and the plan alone decides. The stamp is touched only when
something ran, dated 1970 when a run failed, so the next `make report` reruns exactly what
failed, and the page is re-rendered only after runs. Each run's timing (wall, kernel start,
cells, vocab load, the analysis's own compute) goes to `RESULTS/.timing/`, run metadata that the
benchmark reads (`bench.report_regeneration`), never the report's tables.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .paths import RESULTS, ROOT, vocab_path, write_json


def out_of_date(analysis: str, vocab: str, results: Path = RESULTS) -> str:
    """Why `analysis`'s result for `vocab` must be made again, or "" when it is current."""
    from .results import check, why_stale

    p = results / analysis / f"{vocab}.json"
    if not p.exists():
        return "no result yet"
    try:
        r = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        return f"unreadable result ({type(e).__name__})"
    if not isinstance(r, dict) or r.get("status") != "ok":
        return "failed last time"
    if check(analysis, vocab, r):
        return "does not match its schema"
    return why_stale(results, analysis, r)


def plan(vocab: str, analyses: list[str], results: Path = RESULTS) -> dict[str, str]:
    """The analyses to run for `vocab`, each with why; the current ones are left out."""
    return {a: why for a in analyses if (why := out_of_date(a, vocab, results))}


def _size(vocab: str) -> int:
    try:
        return vocab_path(vocab).stat().st_size
    except OSError:
        return 0


def order(jobs: dict[str, list[str]]) -> list[tuple[str, list[str]]]:
    """The inputs the largest first (the file's size times its runs, a matrix counted as four),
    so the last input a worker takes is a small one and two workers end close together."""
    def cost(item: tuple[str, list[str]]) -> tuple[int, str]:
        vocab, analyses = item
        return (-_size(vocab) * sum(4 if a == "matrix" else 1 for a in analyses), vocab)

    return sorted(((v, a) for v, a in jobs.items() if a), key=cost)


# -- Make's jobserver: the job slots `make -jN` shares with the commands it runs ---------------------
class Jobserver:
    """The slots beyond the one this command holds: taken without blocking, always given back.

    Make passes its slots as a pipe (`--jobserver-auth=R,W`, Make 4.3) or a fifo
    (`--jobserver-auth=fifo:PATH`, Make 4.4) in MAKEFLAGS. The pipe is reopened through /proc
    with O_NONBLOCK, a file description of its own, so Make's own blocking reads are untouched.
    """

    def __init__(self, makeflags: str) -> None:
        self.rfd = self.wfd = -1
        self.held: list[bytes] = []
        auth = next((w.split("=", 1)[1] for w in makeflags.split() if w.startswith(("--jobserver-auth=", "--jobserver-fds="))), "")
        try:
            if auth.startswith("fifo:"):
                self.rfd = os.open(auth[5:], os.O_RDONLY | os.O_NONBLOCK)
                self.wfd = os.open(auth[5:], os.O_WRONLY)
            elif "," in auth:
                r, w = (int(x) for x in auth.split(",", 1))
                os.fstat(r), os.fstat(w)  # closed when the recipe is not marked `+`: then no extra slot
                self.rfd = os.open(f"/proc/self/fd/{r}", os.O_RDONLY | os.O_NONBLOCK)
                self.wfd = w
        except (OSError, ValueError):
            self.rfd = self.wfd = -1

    @property
    def usable(self) -> bool:
        return self.rfd >= 0

    def take(self) -> bool:
        if self.rfd < 0:
            return False
        try:
            got = os.read(self.rfd, 1)
        except BlockingIOError:
            return False
        if not got:
            return False
        self.held.append(got)
        return True

    def give(self) -> None:
        if self.held:
            os.write(self.wfd, self.held.pop())

    def close(self) -> None:
        while self.held:
            self.give()
        if self.rfd >= 0:
            os.close(self.rfd)
            self.rfd = -1


def make_flags() -> tuple[bool, int | None, str]:
    """(dry run, `-jN` or None, MAKEFLAGS) from the environment Make gives a recipe."""
    flags = os.environ.get("MAKEFLAGS", "")
    words = flags.split()
    # -n, -q and -t run a `+` recipe all the same: the pool then only says what it would run
    dry = bool(words) and not words[0].startswith("-") and any(c in words[0] for c in "nqt")
    jobs: int | None = None
    for w in words:
        if w.startswith("-j"):
            jobs = int(w[2:]) if w[2:].isdigit() else (os.cpu_count() or 1)
    return dry, jobs, flags


# -- the worker process ------------------------------------------------------------------------------
def serve(reply_fd: int, out_root: Path | None = None, results: Path | None = None, notebooks: Path | None = None) -> int:
    """A worker: inputs in as JSON lines on stdin, a reply line per run and per input on `reply_fd`."""
    from .errors import InputError
    from .run import NOTEBOOKS, Worker, fast_imports

    fast_imports()
    import nbclient, nbconvert, papermill  # noqa: F401, E401 - counted as the worker's start-up

    # stopped by the pool (an interrupted make): leave through Worker.__exit__, which stops the kernel
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    cmds = os.fdopen(os.dup(0), "r")
    # the kernels must not read the pool's instructions
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    reply = os.fdopen(reply_fd, "w", buffering=1)
    reply.write(json.dumps({"ready": _process_age()}) + "\n")
    with Worker(out_root, results, notebooks_dir=notebooks or NOTEBOOKS, progress=False) as w:  # the pool says each run's line
        for line in cmds:
            job = json.loads(line)
            try:
                statuses = w.run_vocab(job["vocab"], job["analyses"])
            except InputError as e:
                statuses = [{"notebook": a, "vocab": job["vocab"], "status": "failed", "error": str(e)} for a in job["analyses"]]
            for st in statuses:
                reply.write(json.dumps({"run": st}) + "\n")
            reply.write(json.dumps({"done": job["vocab"]}) + "\n")
    return 0


def _process_age() -> float:
    """Seconds since this process started (Linux /proc; 0 where it cannot be told)."""
    try:
        start = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(uptime - start / os.sysconf("SC_CLK_TCK"), 0.0)
    except (OSError, ValueError, IndexError):
        return 0.0


@dataclass
class _Proc:
    p: subprocess.Popen[str]
    reply: int  # the read end of the worker's reply pipe
    buf: bytes = b""
    job: tuple[str, list[str]] | None = None
    done: list[str] = field(default_factory=list)
    token: bool = False  # holds a slot taken from Make's jobserver
    ready: float | None = None
    spawned: float = 0.0


def run_pool(jobs: list[tuple[str, list[str]]], workers: int, server: Jobserver | None = None,
             results: Path = RESULTS, say=print, out_root: Path | None = None,  # type: ignore[no-untyped-def]
             notebooks: Path | None = None) -> tuple[list[dict[str, object]], list[dict[str, float]]]:
    """Run `jobs` ((input, its analyses), in order) on at most `workers` workers; the first is
    this command's own slot, each other one takes a slot from `server` first. Returns every run's
    status and each worker's start-up."""
    from .run import status_line, write_timing

    queue = list(jobs)
    total = sum(len(a) for _, a in jobs)
    procs: list[_Proc] = []
    statuses: list[dict[str, object]] = []
    starts: list[dict[str, float]] = []

    def spawn(token: bool) -> None:
        r, w = os.pipe()
        where = [f"--results={results}", *([f"--out-root={out_root}"] if out_root else []),
                 *([f"--notebooks={notebooks}"] if notebooks else [])]
        p = subprocess.Popen([sys.executable, "-m", "llgbridge.batch", "--serve", str(w), *where], stdin=subprocess.PIPE,
                             text=True, pass_fds=(w,), cwd=ROOT, env={**os.environ, "MAKEFLAGS": ""})
        os.close(w)
        os.set_blocking(r, False)
        procs.append(_Proc(p, r, token=token, spawned=time.monotonic()))

    def hand(w: _Proc) -> bool:
        if not queue:
            return False
        w.job = queue.pop(0)
        w.done = []
        assert w.p.stdin is not None
        try:
            w.p.stdin.write(json.dumps({"vocab": w.job[0], "analyses": w.job[1]}) + "\n")
            w.p.stdin.flush()
        except OSError:
            pass  # it died: its job is failed when its end is read
        return True

    def fail(vocab: str, analyses: list[str], done: list[str], why: str) -> None:
        for a in analyses:
            if a not in done:
                st: dict[str, object] = {"notebook": a, "vocab": vocab, "status": "failed", "error": why}
                _write_failed(results, st)
                statuses.append(st)
                say(f"[{a}] {vocab} FAILED: {why}  ({len(statuses)}/{total})")

    def finish(w: _Proc, why: str) -> None:
        """A worker gone: whatever of its input had not run fails with `why`."""
        if w.job:
            fail(*w.job, w.done, why)
            w.job = None
        if w.token and server:
            server.give()
        os.close(w.reply)
        procs.remove(w)

    spawn(False)
    try:
        while procs or queue:
            # one more worker while inputs wait and Make has a free slot
            want = len(queue) - sum(1 for w in procs if w.job is None)
            if want > 0 and len(procs) < workers and (server is None or server.take()):
                spawn(server is not None)
            if not procs:
                spawn(False)
            for w in procs:
                if w.ready is not None and w.job is None and not hand(w) and w.p.stdin and not w.p.stdin.closed:
                    w.p.stdin.close()  # nothing left for it: let it go, and its slot
            fds = [w.reply for w in procs]
            extra = [server.rfd] if server and server.usable and len(procs) < workers and queue else []
            readable, _, _ = select.select(fds + extra, [], [], 0.5 if extra else 5)
            for w in list(procs):
                if w.reply not in readable:
                    continue
                try:
                    chunk = os.read(w.reply, 1 << 16)
                except BlockingIOError:
                    continue
                if not chunk:  # the worker ended: by itself when there was nothing left, or it died
                    code = w.p.wait()
                    if w.ready is None and not starts:  # none could even start: no other would either
                        while queue:
                            fail(*queue.pop(0), [], f"the worker process could not start (exit {code})")
                    finish(w, f"the worker process died (exit {code}) before this run")
                    continue
                w.buf += chunk
                while b"\n" in w.buf:
                    line, w.buf = w.buf.split(b"\n", 1)
                    msg = json.loads(line)
                    if "ready" in msg:
                        w.ready = msg["ready"]
                        starts.append({"process": round(msg["ready"], 4), "wait": round(time.monotonic() - w.spawned, 4)})
                    elif "run" in msg:
                        st = msg["run"]
                        statuses.append(st)
                        w.done.append(str(st["notebook"]))
                        write_timing(results, st)
                        say(f"{status_line(st)}  ({len(statuses)}/{total})")
                    elif "done" in msg:
                        w.job = None  # the next turn hands it an input, or lets it go
    finally:
        # only left running when this loop was interrupted (Ctrl-C, an error): a worker stops its
        # kernel on SIGTERM (`serve`); one that does not within 10 s is killed
        for w in list(procs):
            if w.p.poll() is None:
                w.p.terminate()
                try:
                    w.p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    w.p.kill()
                    w.p.wait()
            if w.token and server:
                server.give()
    return statuses, starts


def _write_failed(results: Path, st: dict[str, object]) -> None:
    from .run import write_failed

    try:
        write_failed(results / str(st["notebook"]) / f"{st['vocab']}.json", st, None)
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m llgbridge.batch", description=__doc__.splitlines()[0])
    ap.add_argument("--vocabs", nargs="*", default=[], help="the inputs every --analyses runs on")
    ap.add_argument("--analyses", nargs="*", default=[])
    ap.add_argument("--also", action="append", default=[], metavar="ANALYSIS=V1,V2",
                    help="an analysis on some inputs only (the matrix on the synthetic models, the corpus sample)")
    ap.add_argument("--workers", type=int, default=None, help="at most this many (default: Make's -j, else 1)")
    ap.add_argument("--stamp", type=Path, default=None, help="written when every run ends ok (dated 1970 otherwise)")
    ap.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--results", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out-root", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--notebooks", type=Path, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.serve is not None:
        return serve(a.serve, a.out_root, a.results, a.notebooks)
    from .paths import name_problem

    wanted: dict[str, list[str]] = {v: list(a.analyses) for v in a.vocabs}
    for spec in a.also:
        analysis, _, names = spec.partition("=")
        for v in filter(None, names.replace(",", " ").split()):
            wanted.setdefault(v, []).append(analysis)
    for v in wanted:
        why = name_problem(v)
        if why:
            print(f"[{v}] {why}", file=sys.stderr)
            return 2
    t0 = time.monotonic()
    plans = {v: p for v in wanted if (p := plan(v, wanted[v]))}
    todo = {v: list(p) for v, p in plans.items()}
    plan_s = time.monotonic() - t0
    dry, jobs, flags = make_flags()
    for v, why in plans.items():
        print(f"[{v}] " + ", ".join(f"{n} ({reason})" for n, reason in why.items()), flush=True)
    if dry:
        return 0
    failed = 0
    statuses: list[dict[str, object]] = []
    if todo:
        server = Jobserver(flags)
        limit = a.workers or jobs or 1
        n_runs = sum(len(x) for x in todo.values())
        print(f"== {n_runs} runs on {len(todo)} inputs, at most {limit} worker(s)", flush=True)
        try:
            statuses, starts = run_pool(order(todo), limit, server if server.usable and not a.workers else None,
                                        say=lambda s: print(s, flush=True))
        finally:
            server.close()
        failed = sum(s["status"] != "ok" for s in statuses)
        write_json(RESULTS / ".timing" / "pool.json", {"plan": round(plan_s, 4), "wall": round(time.monotonic() - t0, 4),
                                                       "workers": starts, "runs": len(statuses), "failed": failed})
        if any("unwritten" in s for s in statuses):
            return 1  # a result that could not be written is lost to the report: Make must stop and say so
    if a.stamp is not None and (todo or not a.stamp.exists()):
        # touched only when something ran: Make re-renders the page after this stamp, and a
        # plan with nothing to do changed no result
        a.stamp.parent.mkdir(parents=True, exist_ok=True)
        a.stamp.touch()
        if failed:
            os.utime(a.stamp, (0, 0))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["out_of_date", "plan", "order", "run_pool", "Jobserver"]
