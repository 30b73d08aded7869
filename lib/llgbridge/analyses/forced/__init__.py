"""The forced-mask test: the mask along a literal, step by step."""

from __future__ import annotations

from typing import TypedDict

from ..registry import Analysis, BridgeRow


class ForcedPayload(TypedDict):
    literal: str
    rows: list[BridgeRow]


ANALYSIS = Analysis(
    "forced",
    (),
    ForcedPayload,
    runs_on="every",
    whatif=True,
    order=3,
    page=30,
)
