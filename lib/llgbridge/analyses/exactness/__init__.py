"""tokenize_fn's exactness on sampled strings, beside what the probe decided."""

from __future__ import annotations

from ..registry import BRIDGE_ROW, Analysis, Schema

ANALYSIS = Analysis(
    "exactness",
    (),
    Schema(
        {"n_inputs": int, "bridges": list, "exactness": list, "probe_vs_exactness": dict},
        {"bridges": BRIDGE_ROW, "exactness": BRIDGE_ROW, "probe_vs_exactness": {"vocab": str, "cell": str}},
    ),
    runs_on="every",
    whatif=True,
    order=6,
    page=90,
)
