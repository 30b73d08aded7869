"""The compiled code: common/llguidance.cpp shipped and patched, llama.cpp's own test, and the
port checked against it step by step (`analyses.native.compute`)."""

from __future__ import annotations

from typing import Any, TypedDict

from ..registry import Analysis, BlankInt


class NativeRow(TypedDict):
    vocab: str
    sampler: str
    diff_cells: BlankInt
    diff_differ: BlankInt


class NativePayload(TypedDict):
    rows: list[NativeRow]
    differences: list[dict[str, Any]]
    tests: list[dict[str, Any]]


ANALYSIS = Analysis(
    "native",
    ("soundness.py",),
    NativePayload,
    runs_on="every",
    whatif=True,
    built=(("data/native/bin", "*"),),
    order=8,
    page=50,
)
