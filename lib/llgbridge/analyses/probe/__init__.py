"""The PR's three probes of tokenize_fn, per vocab (the probe itself is `llgbridge.probe`)."""

from __future__ import annotations

from typing import Any, TypedDict

from ..registry import Analysis


class ProbeVerdict(TypedDict):
    vocab: str
    tokenize_exact: bool
    greedy: bool


class ProbePayload(TypedDict):
    probe: ProbeVerdict
    cases: list[dict[str, Any]]


ANALYSIS = Analysis(
    "probe",
    (),
    ProbePayload,
    runs_on="every",
    whatif=True,
    order=5,
    page=40,
)
