"""The leak test: the mask at position 0 of the guide's regex grammar, judged by real piece bytes."""

from __future__ import annotations

from ..registry import BRIDGE_ROW, Analysis, Schema

ANALYSIS = Analysis(
    "leak",
    (),
    Schema({"grammar": str, "rows": list, "leaked": dict}, {"rows": BRIDGE_ROW}),
    runs_on="every",
    whatif=True,
    order=2,
    page=20,
)
