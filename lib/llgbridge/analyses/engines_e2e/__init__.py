"""The other engines end to end: each library's own llama.cpp logits processor generating on the
matrix's models, judged by the real bytes of the tokens it let through."""

from __future__ import annotations

from typing import TypedDict

from ..registry import Analysis, Num


class EngineE2eRow(TypedDict):
    model: str
    vocab: str
    engine: str
    version: str
    case: str
    outcome: str


class EnginesE2ePayload(TypedDict):
    rows: list[EngineE2eRow]
    temperature: Num
    seed: int
    max_tokens: int
    limit_s: Num


ANALYSIS = Analysis(
    "engines_e2e",
    (
        "generate.py",
        "synth.py",
        "analyses/engines/",
        # a sidecar engine's pins (guidance's): its versions are not the venv's, which results
        # record, so a change of them must replan its rows as a change of code does
        "analyses/engines/sidecars/*.txt",
        "analyses/matrix/",
        "analyses/native/crashes.py",
    ),
    EnginesE2ePayload,
    runs_on="matrix",
    whatif=False,
    packages=("lm-format-enforcer", "outlines", "outlines-core", "numba"),
    order=10,
    page=81,
)
