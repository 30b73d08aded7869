"""Shared fixtures: the real vocab fixtures, loaded once per session, and the bridge swap.

`LLGBRIDGE_SWAP_VARIANTS=1` makes every test marked `guards` ask for the *other* bridge where it
asks through `variant()`: upstream becomes fixed, and fixed or sentinel (the two bridges that
claim to be correct) become upstream; a candidate patch (nospecial, failclosed) becomes the PR it
improves on, fixed, in the port (`bridge(name, variant(...))`) and the compiled sampler alike. Each
such test must then fail on an assertion: that is how a test shows it catches the bug it names
(`make test-swapped`).
"""

from __future__ import annotations

import dis
import fcntl
import os
import signal
import subprocess
import sys
import types
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from llgbridge import bridges, candidates
from llgbridge.fixtures import vocab_names
from llgbridge.paths import ROOT, vocab_path
from llgbridge.vocab import Vocab

ALL_VOCABS = vocab_names()
SWAP = os.environ.get("LLGBRIDGE_SWAP_VARIANTS") == "1"


# The files that take longest, longest first (`pytest --durations=0` on a 2-core machine, seconds
# in a comment so a stale order is seen): `make test` gives whole files to its two workers in the
# order collected (`--dist loadfile --no-loadscope-reorder`), so starting with these lets the
# workers end together. xdist's own order (most tests first) sent test_batch (54 s, 10 tests) and
# test_whatif last: 250.9 s against 234.6 s of test-seconds per worker. Only the order changes.
LONGEST_FIRST = (
    "test_faults.py",  # about 90
    # about 60, loaded; early, so the session's results (`made_results`) are made before
    # test_schema.py, which reads them too, is handed out
    "test_repro.py",
    "test_batch.py",  # 54
    "test_native.py",  # 52
    "test_server.py",  # 46
    "test_dask_report.py",  # 48
    "test_pages_layout.py",  # 44
    "test_bridges.py",  # 36
    "test_hostile.py",  # 32
    "test_whatif.py",  # 30
    "test_overrides.py",  # 28
    "test_corpus.py",  # 27
    "test_pool.py",  # 24
    "test_notebooks.py",  # 24
    "test_bench.py",  # 20
    "test_generate.py",  # 19
    "test_models.py",  # 19
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {f: i for i, f in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda it: rank.get(it.path.name, len(rank)))  # stable: the rest keep pytest's order
    for it in items:
        if isinstance(it, pytest.Function) and "slow" not in it.keywords and not large(it) and not reaches(it):
            it.add_marker(pytest.mark.unit)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "guards(bug): the test must fail when run against the other bridge variant")
    config.addinivalue_line("markers", "slow: takes more than a few seconds")
    config.addinivalue_line(
        "markers", "unit: needs no kernel, no server, no compiled build and no process of its own (make check); by rule"
    )


# `make check` runs the tests marked `unit`, and the mark is given by a rule, not by hand: a test is
# a unit unless it is marked `slow`, or its code reaches one of these (its body, the fixtures it
# asks for, and every function of tests/ those call, by the names their bytecode uses). A module
# here starts a kernel, a server, a compiled program or a process of its own, or reads the
# compiled build. The rule reads names, so a miss is possible: `make check` then refuses, at the
# moment it happens, a unit test that starts a process (a kernel, a server and a compiled program
# are each one), so a miss fails rather than slows the loop (`_guard`).
REACHES = (
    "subprocess",
    "multiprocessing",
    "concurrent.futures",
    "papermill",
    "nbclient",
    "jupyter_client",
    "llgbridge.run",
    "llgbridge.batch",
    "llgbridge.pool",
    "llgbridge.remote",
    "llgbridge.whatif",
    "llgbridge.audit",
    "llgbridge.fetch",
    "llgbridge.models",
    "llgbridge.cbuild",
    "llgbridge.gguf_fuzz",
    "llgbridge.analyses.native",
    "llgbridge.analyses.server",
    "llgbridge.analyses.engines",
    "llgbridge.analyses.engines_e2e",
    "llgbridge.analyses.corpus",
    "llgbridge.measure",
    "llgbridge.report",
)
TESTS = Path(__file__).parent
# a vocab larger than this (its fixture's file) takes seconds to load and to build a bridge on, in
# every test parametrized over the fixtures: the unit loop runs those on the smaller ones only
UNIT_MB = 2.0


def _large_vocab(value: object) -> bool:
    return isinstance(value, str) and value in ALL_VOCABS and vocab_path(value).stat().st_size > UNIT_MB * 1e6


def large(item: pytest.Function) -> bool:
    """Whether the test names a vocab fixture of more than `UNIT_MB` MB: in its parameters, or as a
    string in its own code."""
    params = getattr(item, "callspec", None)
    named = [*(params.params.values() if params else ())]
    named += [c for code in _codes(item.function.__code__) for c in code.co_consts]
    return any(_large_vocab(v) for v in named)


def _heavy(module: str) -> bool:
    return any(module == r or module.startswith(r + ".") for r in REACHES)


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    """`code` and every function, lambda and class body written inside it."""
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _codes(c)


def _imported(code: types.CodeType) -> Iterator[str]:
    """The modules `code` imports itself: `import a.b` gives a.b, `from a import b` a and a.b."""
    module = ""
    for ins in dis.get_instructions(code):
        if ins.opname == "IMPORT_NAME":
            module = ins.argval
            yield module
        elif ins.opname == "IMPORT_FROM":
            yield f"{module}.{ins.argval}"


def _reaches(fn: Any, seen: set[int]) -> bool:
    """Whether `fn` (a function of tests/), or a function of tests/ it names, names a module of
    `REACHES` or something defined in one."""
    fn = getattr(fn, "__wrapped__", fn)
    if id(fn) in seen or not isinstance(fn, types.FunctionType) or Path(fn.__code__.co_filename).parent != TESTS:
        return False
    seen.add(id(fn))
    g = fn.__globals__
    for code in _codes(fn.__code__):
        if any(_heavy(m) for m in _imported(code)):  # imported where it is used, inside the test
            return True
        for name in code.co_names:
            obj = g.get(name)
            if obj is None:
                continue
            if isinstance(obj, types.ModuleType):
                if _heavy(obj.__name__):
                    return True
                continue
            if _heavy(getattr(obj, "__module__", None) or ""):
                return True
            if _reaches(obj, seen):
                return True
    return False


def reaches(item: pytest.Function) -> bool:
    """Whether the test's code reaches a module of `REACHES` (`_reaches`)."""
    seen: set[int] = set()
    fns: list[Any] = [item.function]
    for defs in item._fixtureinfo.name2fixturedefs.values():
        fns += [d.func for d in defs]
    return any(_reaches(f, seen) for f in fns)


_GUARDED: list[str] = []  # the unit test running now, under `make check`


def _guard(event: str, args: tuple[Any, ...]) -> None:
    if not _GUARDED:
        return
    if event in ("subprocess.Popen", "os.posix_spawn", "os.fork", "os.system", "os.exec"):
        raise RuntimeError(f"{_GUARDED[0]} is marked unit but starts a process ({event}): conftest.REACHES misses it")


if os.environ.get("LLGBRIDGE_CHECK") == "1":
    # here, before the guard: on a machine where it has none yet, matplotlib makes its font cache
    # by running fc-list the first time a plot asks for a font, and a unit test that plots would
    # then fail, and leave no cache, on every `make check` until a `make test` made one
    import matplotlib.font_manager  # noqa: F401

    sys.addaudithook(_guard)


def _guarded(item: pytest.Item) -> Iterator[None]:
    if os.environ.get("LLGBRIDGE_CHECK") == "1" and "unit" in item.keywords:
        _GUARDED.append(item.nodeid)
    try:
        return (yield)
    finally:
        _GUARDED.clear()


# a fixture's setup too: a program a fixture starts is its test's (a pool's spawned workers raise no
# audit event: REACHES must name what starts them)
@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    return (yield from _guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    return (yield from _guarded(item))


@cache
def vocab(name: str) -> Vocab:
    path = vocab_path(name)
    if not path.exists():
        pytest.fail(f"{path} missing: run `make data` first")
    return Vocab(path, name)


@cache
def bridge(name: str, variant: str) -> bridges.Bridge:
    return bridges.make_bridge(vocab(name), variant)


def variant(name: str) -> str:
    """The bridge a `guards` test asks for, or the one that has (or lacks) the bug instead under
    LLGBRIDGE_SWAP_VARIANTS=1."""
    if not SWAP:
        return name
    # a candidate patch beside the PR is swapped for the PR it improves on
    return {
        "upstream": "fixed",
        "fixed": "upstream",
        "sentinel": "upstream",
        **{c: "fixed" for c in candidates.NAMES},
    }.get(name, name)


# The results the tests that read results read (`made_results`): every analysis on llama-spm, the
# smallest input each one runs on (its fixture, its synthetic model, the corpus's sample), by one
# run of the pool's own command, as `make report` runs it: about 25 CPU-seconds. llama-bpe, whose
# findings the page's repro lines name too, is left to `make report`: its native and server runs
# alone took 50 CPU-seconds more (measured on the suite's 2-core machine)
MADE = (
    ["--inputs", "every=llama-spm", "--inputs", "matrix=llama-spm", "--inputs", "server=llama-spm"]
    + ["--inputs", "corpus-sample=llama-spm"],
)


@pytest.fixture(scope="session")
def made_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results folder made by the real analyses (`MADE`), never data/results: a fresh clone has
    none, and a test that skips without them proves nothing in CI. Made once per session: pytest-
    xdist's workers share one folder under the session's temporary root, the first to ask makes it
    while the others wait on its lock."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = root / "made-results"
    folder.mkdir(exist_ok=True)
    results, done = folder / "results", folder / "complete"
    with (folder / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
            for argv in MADE:
                ran = subprocess.run(
                    [sys.executable, "-m", "llgbridge.batch", *argv, "--workers", "1"]
                    + ["--results", str(results), "--out", str(folder / "reports")],
                    cwd=ROOT,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=1200,
                )
                assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
            done.touch()
    return results


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    """The processes a test starts, each in a session of its own: all of them ended after it."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


@pytest.fixture(autouse=True)
def _address_space_given_back() -> Iterator[None]:
    """No test leaves its pytest worker under another address-space bound: a later test's Chromium
    dies of SIGTRAP under one (a Worker that could not start left 16 GiB behind)."""
    import resource

    before = resource.getrlimit(resource.RLIMIT_AS)
    yield
    after = resource.getrlimit(resource.RLIMIT_AS)
    if after != before:
        resource.setrlimit(resource.RLIMIT_AS, before)
        pytest.fail(f"the test left RLIMIT_AS at {after}, not {before}", pytrace=False)
