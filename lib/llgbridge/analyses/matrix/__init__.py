"""The end-to-end matrix: every model x bridge x case, generated and judged by bytes."""

from __future__ import annotations

from ..registry import NUM, Analysis, Schema

ANALYSIS = Analysis(
    "matrix",
    ("generate.py", "synth.py"),
    Schema(
        {"rows": list, "device": str, "n_gpu_layers": int, "temperature": NUM, "seed": int, "max_tokens": int},
        {"rows": {"model": str, "vocab": str, "case": str, "bridge": str, "outcome": str}},
    ),
    runs_on="matrix",
    whatif=True,
    gpu=True,
    order=9,
    page=60,
)
