"""Soundness: every token the truth admits along a walk, against each bridge's mask (`llgbridge.soundness`)."""

from __future__ import annotations

from ..registry import BRIDGE_ROW, Analysis, Schema

ANALYSIS = Analysis(
    "soundness",
    ("soundness.py",),
    Schema({"soundness": list}, {"soundness": BRIDGE_ROW}),
    runs_on="every",
    whatif=True,
    order=7,
    page=100,
)
