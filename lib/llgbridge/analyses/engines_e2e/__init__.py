"""The other engines end to end: each library's own llama.cpp logits processor generating on the
matrix's models, judged by the real bytes of the tokens it let through."""

from __future__ import annotations

from ..registry import Analysis, Schema

ANALYSIS = Analysis(
    "engines_e2e",
    ("generate.py", "synth.py", "analyses/engines/", "analyses/matrix/"),
    Schema(
        {"rows": list, "temperature": (int, float), "seed": int, "max_tokens": int, "limit_s": (int, float)},
        {"rows": {"model": str, "vocab": str, "engine": str, "version": str, "case": str, "outcome": str}},
    ),
    runs_on="matrix",
    whatif=False,
    packages=("lm-format-enforcer", "outlines", "outlines-core", "numba"),
    order=10,
    page=81,
)
