"""The other engines on llama.cpp: each library's own integration, audited like the bridges."""

from __future__ import annotations

from ..registry import NUM, Analysis, Schema

ANALYSIS = Analysis(
    "engines",
    (),
    Schema(
        {"rows": list, "examples": dict, "seconds": dict, "limit_s": NUM},
        {"rows": {"vocab": str, "engine": str, "version": str}},
    ),
    runs_on="every",
    whatif=True,
    packages=("lm-format-enforcer", "outlines", "outlines-core"),
    order=4,
    page=80,
)
