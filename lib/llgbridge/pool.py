"""One small crash-isolating process pool, for `make report`'s notebook workers (`batch`) and the
corpus's jobs (`cluster`'s local engine).

Its promises:
- each worker process runs one job at a time, so a crash (an abort or a segfault inside llama.cpp
  or llguidance) is charged to the job it was running and to no other;
- a worker that dies, or stops answering for `stall` seconds (stopped with SIGSTOP, wedged outside
  any cell's time limit), is killed and its job runs once more on a fresh worker; a second loss
  records the job lost, with the cause, and the pool goes on;
- at most `workers` processes, and each beyond the first holds one of Make's job slots
  (`jobserver.Jobserver`) while it lives, so `make -jN` is honoured beside Make's other jobs.

`concurrent.futures.ProcessPoolExecutor` breaks every pending future when one worker dies, so the
job that crashed cannot be told from its neighbours, and it has no notion of a stalled worker.

A worker runs `service(*args)`, a context manager (entered once per process, for what a worker
keeps from one job to the next: a Jupyter kernel, imports) yielding a function
`handle(job, emit) -> value`. `emit(x)` sends a partial result while the job runs (a notebook's
status, in `batch`); a busy worker also sends a sign of life every `HEARTBEAT` seconds from a
thread of its own. Workers are started with `spawn`, not `fork`: the parent may hold llama.cpp
and llguidance state that must not be copied.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from multiprocessing import get_context
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Required, TypedDict, Unpack

from .jobserver import Jobserver

ATTEMPTS = 2  # a job whose worker is lost runs once more, then is recorded lost
HEARTBEAT = 2.0  # seconds between a worker's signs of life
STALL = 120.0  # seconds without one after which a worker is given up on
START_FAILURES = 3  # workers in a row that end before they are ready: the pool stops starting more

Handle = Callable[[Any, Callable[[Any], None]], Any]
Service = Callable[..., AbstractContextManager[Handle]]


class Stopped(Exception):
    """The command was asked to stop by a signal (`stop_on_signals`)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"stopped by {signal.Signals(signum).name}")


STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP (`timeout`, a closed terminal, a cancelled CI job) stop the command the
    way Ctrl-C does: as an exception (`Stopped`), so a running pool stops its workers, and they their
    kernels and servers, before this process exits. The workers left the terminal's process group
    (`_child`), so a signal that ends only this process would leave them running and writing
    results after the command had returned (issue 48, break 11). A second signal during that
    clean-up is ignored: the clean-up is what it asks for."""

    def stop(signum: int, frame: object) -> None:
        for s in STOP_SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        raise Stopped(signum)

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {s: signal.signal(s, stop) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, h in before.items():
            signal.signal(s, h)


def death(exitcode: int | None) -> str:
    """How a worker ended, in words: `killed by SIGKILL`, `exited with status 3`."""
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exited with status {exitcode}"


def process_age() -> float:
    """Seconds since this process started (Linux /proc; 0 where it cannot be told)."""
    try:
        start = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(uptime - start / os.sysconf("SC_CLK_TCK"), 0.0)
    except (OSError, ValueError, IndexError):
        return 0.0


def _child(conn: Connection, service: Service, args: tuple[Any, ...], heartbeat: float) -> None:
    # The parent alone decides to stop (it stops its workers with SIGTERM). The terminal's Ctrl-C
    # goes to the foreground process group, so a worker leaves it: ignoring SIGINT was not enough,
    # since nbclient installs a SIGINT handler of its own while a notebook runs (it kills the kernel,
    # and the run was recorded as a crash inside native code) and puts Python's default handler back
    # after it. A SIGINT sent to a worker itself still ends its run as an interruption (run.Interrupted),
    # never as a crash.
    if os.getsid(0) != os.getpid():
        os.setsid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    lock = threading.Lock()

    def send(msg: tuple[Any, ...]) -> None:
        with lock:
            conn.send(msg)

    def beat() -> None:
        while True:
            time.sleep(heartbeat)
            try:
                send(("alive",))
            except (OSError, ValueError):
                return

    threading.Thread(target=beat, daemon=True).start()
    with service(*args) as handle:
        send(("ready", process_age()))
        while True:
            job = conn.recv()
            if job is None:
                return
            send(("done", handle(job, lambda x: send(("emit", x)))))


@dataclass
class _Proc:
    proc: Any  # multiprocessing's SpawnProcess
    conn: Connection
    slot: bool  # holds a slot taken from Make's jobserver
    spawned: float
    last: float  # when it last said anything
    ready: bool = False
    job: int | None = None
    quit: bool = False  # told there is nothing more


@dataclass
class Stats:
    """Each worker's start-up: seconds its process took to be ready, and the wait seen here."""

    starts: list[dict[str, float]] = field(default_factory=list)


@dataclass(frozen=True)
class PoolConfig:
    """How a pool runs: at most `workers` processes, each beyond the first holding one of Make's
    job slots (`slots`, when given); a worker that says nothing for `stall` seconds is given up on
    (a busy one says it lives every `heartbeat`); a job whose worker is lost runs `attempts` times
    in all before it is recorded lost."""

    workers: int
    slots: Jobserver | None = None
    stall: float = STALL
    heartbeat: float = HEARTBEAT
    attempts: int = ATTEMPTS


class PoolSettings(TypedDict, total=False):
    """`PoolConfig`'s fields as `run`'s keywords, so a caller names only those it changes."""

    workers: Required[int]
    slots: Jobserver | None
    stall: float
    heartbeat: float
    attempts: int


@dataclass(frozen=True)
class Hooks:
    """What a pool tells its caller: a job's end (`on_done(i, value, tries)`), its loss
    (`on_lost(i, cause, tries)`), what it sent while it ran (`on_emit(i, x)`), and what to send
    when it runs again after a lost worker (`again(i)`)."""

    on_done: Callable[[int, Any, int], None]
    on_lost: Callable[[int, str, int], None]
    on_emit: Callable[[int, Any], None] | None = None
    again: Callable[[int], Any] | None = None


class Pool:
    """One run of `run`: its jobs, its workers and what each job has cost so far. Each method is
    one step: start a worker, hand out jobs, wait, collect what a worker said, charge a lost one,
    let them all go."""

    def __init__(
        self, jobs: Sequence[Any], service: Service, args: tuple[Any, ...], config: PoolConfig, hooks: Hooks
    ) -> None:
        self.ctx = get_context("spawn")
        self.service, self.args = service, args
        self.config, self.hooks = config, hooks
        self.tries = [0] * len(jobs)
        self.payload: list[Any] = list(jobs)
        self.todo = deque(range(len(jobs)))
        self.procs: list[_Proc] = []
        self.stats = Stats()
        self.start_failures = 0
        self.ever_ready = False

    def run(self) -> Stats:
        finished = False
        try:
            while self.todo or any(w.job is not None for w in self.procs):
                n_idle = sum(1 for w in self.procs if w.job is None and not w.quit)
                if self.grow(n_idle):
                    continue
                self.hand_out()
                ready = self.listen(n_idle)
                now = time.monotonic()
                for w in list(self.procs):
                    self.collect(w, ready, now)
            finished = True
        finally:
            self.shutdown(finished)
        return self.stats

    def grow(self, n_idle: int) -> bool:
        """One more worker while jobs wait for one and Make has a free slot (the first needs none)."""
        procs, slots = self.procs, self.config.slots
        if (
            len(self.todo) > n_idle
            and len(procs) < self.config.workers
            and (not procs or slots is None or slots.take())
        ):
            self.spawn(bool(procs) and slots is not None)
            return True
        if not procs and self.todo:
            self.spawn(False)
            return True
        return False

    def spawn(self, slot: bool) -> None:
        parent, child = self.ctx.Pipe()
        p = self.ctx.Process(target=_child, args=(child, self.service, self.args, self.config.heartbeat), daemon=True)
        p.start()
        child.close()
        now = time.monotonic()
        self.procs.append(_Proc(p, parent, slot, now, now))

    def hand_out(self) -> None:
        """The next job to each ready worker with none; a worker with nothing left is let go."""
        now = time.monotonic()
        for w in self.procs:
            if w.ready and w.job is None and not w.quit:
                if self.todo:
                    i = self.todo.popleft()
                    self.tries[i] += 1
                    w.job = i
                    w.last = now
                    try:
                        w.conn.send(self.payload[i])
                    except OSError:
                        pass  # it died: charged when its end is seen
                else:
                    w.quit = True
                    try:
                        w.conn.send(None)  # nothing left for it: let it go, and its slot
                    except OSError:
                        pass

    def listen(self, n_idle: int) -> set[Any]:
        """What is ready to read: a worker's message or end, or (when one more worker is wanted)
        a slot of Make's."""
        slots, procs = self.config.slots, self.procs
        want_slot = slots is not None and slots.usable and len(procs) < self.config.workers and len(self.todo) > n_idle
        return set(
            wait(
                [w.conn for w in procs]
                + [w.proc.sentinel for w in procs]
                + ([slots.rfd] if slots is not None and want_slot else []),
                timeout=min(self.config.heartbeat, 0.5 if want_slot else self.config.heartbeat),
            )
        )

    def collect(self, w: _Proc, ready: set[Any], now: float) -> None:
        """Every message `w` sent, then its end or its stall, if either is seen."""
        gone = False
        while w.conn in ready or w.conn.poll():
            ready.discard(w.conn)
            try:
                msg = w.conn.recv()
            except (EOFError, OSError):
                gone = True
                break
            w.last = now
            if msg[0] == "ready":
                w.ready = self.ever_ready = True
                self.stats.starts.append({"process": round(msg[1], 4), "wait": round(now - w.spawned, 4)})
            elif msg[0] == "emit" and self.hooks.on_emit is not None and w.job is not None:
                self.hooks.on_emit(w.job, msg[1])
            elif msg[0] == "done" and w.job is not None:
                i, w.job = w.job, None
                self.hooks.on_done(i, msg[1], self.tries[i])
        if gone or w.proc.sentinel in ready or not w.proc.is_alive():
            w.proc.join(5)
            if w.quit and w.job is None:
                self.release(w)  # let go: it left by itself
            else:
                self.lose(w, death(w.proc.exitcode))
        elif now - w.last > self.config.stall:
            self.lose(w, f"stopped answering for {self.config.stall:.0f} s, then killed")

    def release(self, w: _Proc) -> None:
        w.conn.close()
        if w.slot and self.config.slots is not None:
            self.config.slots.give()
        self.procs.remove(w)

    def lose(self, w: _Proc, cause: str) -> None:
        """A worker gone while it ran job `w.job` (or while it started): charge that job alone."""
        if w.proc.is_alive():
            w.proc.kill()
        w.proc.join(5)
        self.release(w)
        if not w.ready:
            self.start_failures += 1
            n = self.start_failures
            if not self.ever_ready and n >= START_FAILURES or n >= START_FAILURES * 2:
                while self.todo:  # none can start: no later one would either
                    i = self.todo.popleft()
                    self.hooks.on_lost(i, f"could not start: {cause}", self.tries[i])
        if w.job is None:
            return
        i = w.job
        if self.tries[i] < self.config.attempts:
            nxt = self.hooks.again(i) if self.hooks.again else self.payload[i]
            if nxt is None:
                self.hooks.on_done(i, None, self.tries[i])
            else:
                self.payload[i] = nxt
                self.todo.appendleft(i)  # run again next, on a fresh worker
        else:
            self.hooks.on_lost(i, cause, self.tries[i])

    def shutdown(self, finished: bool) -> None:
        """Every job ended: the workers are let go; the loop interrupted (Ctrl-C, an error): SIGTERM
        (a notebook worker stops its kernel on it); either way a kill past 10 s."""
        for w in self.procs:
            if w.quit or not w.proc.is_alive():
                continue
            if finished:
                try:
                    w.conn.send(None)
                except OSError:
                    pass
            else:
                w.proc.terminate()
        for w in list(self.procs):
            w.proc.join(10)
            if w.proc.is_alive():
                w.proc.kill()
                w.proc.join()
            self.release(w)


def run(
    jobs: Sequence[Any],
    service: Service,
    args: tuple[Any, ...] = (),
    *,
    on_done: Callable[[int, Any, int], None],
    on_lost: Callable[[int, str, int], None],
    on_emit: Callable[[int, Any], None] | None = None,
    again: Callable[[int], Any] | None = None,
    **config: Unpack[PoolSettings],
) -> Stats:
    """Run every job of `jobs` as `config` says (`PoolConfig`'s fields: `workers`, and `slots`,
    `stall`, `heartbeat`, `attempts` when not the defaults); each ends in `on_done(i, value,
    attempts)` or, its worker lost `attempts` times, `on_lost(i, cause, attempts)`.

    `again(i)` is what to send when job i runs again after a lost worker (default: the same job;
    None: nothing of it is left to run, and it counts as done with the value None).
    """
    return Pool(jobs, service, args, PoolConfig(**config), Hooks(on_done, on_lost, on_emit, again)).run()
