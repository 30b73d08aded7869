"""tokenize_fn's exactness on sampled strings, beside what the probe decided."""

from __future__ import annotations

from typing import TypedDict

from ..registry import Analysis, BridgeRow


class ProbeVsExactnessRow(TypedDict):
    vocab: str
    cell: str


class ExactnessPayload(TypedDict):
    n_inputs: int
    bridges: list[BridgeRow]
    exactness: list[BridgeRow]
    probe_vs_exactness: ProbeVsExactnessRow


ANALYSIS = Analysis(
    "exactness",
    (),
    ExactnessPayload,
    runs_on="every",
    whatif=True,
    order=6,
    page=90,
)
