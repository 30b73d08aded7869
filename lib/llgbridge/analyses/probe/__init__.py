"""The PR's three probes of tokenize_fn, per vocab (the probe itself is `llgbridge.probe`)."""

from __future__ import annotations

from ..registry import Analysis, Schema

ANALYSIS = Analysis(
    "probe",
    (),
    Schema({"probe": dict, "cases": list}, {"probe": {"vocab": str, "tokenize_exact": bool, "greedy": bool}}),
    runs_on="every",
    whatif=True,
    order=5,
    page=40,
)
