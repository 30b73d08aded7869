"""The compiled code: common/llguidance.cpp shipped and patched, llama.cpp's own test, and the
port checked against it step by step (`analyses.native.compute`)."""

from __future__ import annotations

from ..registry import BLANK_INT, Analysis, Schema

ANALYSIS = Analysis(
    "native",
    ("soundness.py",),
    Schema(
        {"rows": list, "differences": list, "tests": list},
        {"rows": {"vocab": str, "sampler": str, "diff_cells": BLANK_INT, "diff_differ": BLANK_INT}},
    ),
    runs_on="every",
    whatif=True,
    built=(("data/native/bin", "*"),),
    order=8,
    page=50,
)
