"""Shared fixtures: the real vocab fixtures, loaded once per session, and the variant swap.

`LLGBRIDGE_SWAP_VARIANTS=1` makes every test marked `guards` run against the *other* bridge
variant (upstream <-> fixed). Each such test must then fail: that is how a test shows it
catches the bug it names (`make test-swapped`).
"""
from __future__ import annotations

import os
from functools import cache

import pytest

from llgbridge import bridges
from llgbridge.fixtures import vocab_names
from llgbridge.paths import VOCABS
from llgbridge.vocab import Vocab

ALL_VOCABS = vocab_names()
SWAP = os.environ.get("LLGBRIDGE_SWAP_VARIANTS") == "1"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "guards(bug): the test must fail when run against the other bridge variant")
    config.addinivalue_line("markers", "slow: takes more than a few seconds")


@cache
def vocab(name: str) -> Vocab:
    path = VOCABS / f"ggml-vocab-{name}.gguf"
    if not path.exists():
        pytest.fail(f"{path} missing: run `make data` first")
    return Vocab(path, name)


@cache
def bridge(name: str, variant: str) -> bridges.Bridge:
    return bridges.build(vocab(name), variant)


def variant(name: str) -> str:
    """The variant a `guards` test asks for, or the other one under LLGBRIDGE_SWAP_VARIANTS=1."""
    if not SWAP:
        return name
    return {"upstream": "fixed", "fixed": "upstream"}.get(name, name)
