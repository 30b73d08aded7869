"""Soundness: every token the truth admits along a walk, against each bridge's mask (`llgbridge.soundness`)."""

from __future__ import annotations

from typing import TypedDict

from ..registry import Analysis, BridgeRow


class SoundnessPayload(TypedDict):
    soundness: list[BridgeRow]


ANALYSIS = Analysis(
    "soundness",
    ("soundness.py",),
    SoundnessPayload,
    runs_on="every",
    whatif=True,
    order=7,
    page=100,
)
