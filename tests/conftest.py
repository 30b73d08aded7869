"""Shared fixtures: the real vocab fixtures, loaded once per session, and the bridge swap.

`LLGBRIDGE_SWAP_VARIANTS=1` makes every test marked `guards` ask for the *other* bridge where it
asks through `variant()`: upstream becomes fixed, and fixed or sentinel (the two bridges that
claim to be correct) become upstream; a candidate patch (nospecial, failclosed) becomes the PR it
improves on, fixed, in the port (`bridge(name, variant(...))`) and the compiled sampler alike. Each
such test must then fail on an assertion: that is how a test shows it catches the bug it names
(`make test-swapped`).
"""

from __future__ import annotations

import os
from functools import cache

import pytest

from llgbridge import bridges, candidates
from llgbridge.fixtures import vocab_names
from llgbridge.paths import vocab_path
from llgbridge.vocab import Vocab

ALL_VOCABS = vocab_names()
SWAP = os.environ.get("LLGBRIDGE_SWAP_VARIANTS") == "1"


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
    return bridges.build(vocab(name), variant)


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
