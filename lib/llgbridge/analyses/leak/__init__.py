"""The leak test: the mask at position 0 of the guide's regex grammar, judged by real piece bytes."""

from __future__ import annotations

from typing import Any, TypedDict

from ..registry import Analysis, BridgeRow


class LeakPayload(TypedDict):
    grammar: str
    rows: list[BridgeRow]
    leaked: dict[str, list[dict[str, Any]]]


ANALYSIS = Analysis(
    "leak",
    (),
    LeakPayload,
    runs_on="every",
    whatif=True,
    order=2,
    page=20,
)
