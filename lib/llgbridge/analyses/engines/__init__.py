"""The other engines on llama.cpp: each library's own integration, and llama.cpp's own GBNF sampler,
audited like the bridges."""

from __future__ import annotations

from typing import Any, TypedDict

from ..registry import Analysis, Num


class EngineRow(TypedDict):
    vocab: str
    engine: str
    version: str


class EnginesPayload(TypedDict):
    rows: list[EngineRow]
    examples: dict[str, Any]
    seconds: dict[str, float]
    limit_s: Num


ANALYSIS = Analysis(
    "engines",
    (
        # why an engine's process died is read from its output as the native programs' is
        "analyses/native/crashes.py",
        # bug C's literal is the compiled trace's (`native.trace.special_literal`), and what it reads
        "analyses/native/trace.py",
        "analyses/native/builder.py",
        "analyses/native/logs.py",
        "soundness.py",
    ),
    EnginesPayload,
    runs_on="every",
    whatif=True,
    packages=("lm-format-enforcer", "outlines", "outlines-core"),
    order=4,
    page=80,
)
