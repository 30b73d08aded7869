"""The forced-mask test: the mask along a literal, step by step."""

from __future__ import annotations

from ..registry import BRIDGE_ROW, Analysis, Schema

ANALYSIS = Analysis(
    "forced",
    (),
    Schema({"literal": str, "rows": list}, {"rows": BRIDGE_ROW}),
    runs_on="every",
    whatif=True,
    order=3,
    page=30,
)
