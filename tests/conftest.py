"""Shared fixtures: the real vocab fixtures, loaded once per session, and the bridge swap.

`LLGBRIDGE_SWAP_VARIANTS=1` makes every test marked `guards` ask for the *other* bridge where it
asks through `variant()`: upstream becomes fixed, and fixed or sentinel (the two bridges that
claim to be correct) become upstream; a candidate patch (nospecial, failclosed) becomes the PR it
improves on, fixed, in the port (`bridge(name, variant(...))`) and the compiled sampler alike. Each
such test must then fail on an assertion: that is how a test shows it catches the bug it names
(`make test-swapped`).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "guards(bug): the test must fail when run against the other bridge variant")
    config.addinivalue_line("markers", "slow: takes more than a few seconds")


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
