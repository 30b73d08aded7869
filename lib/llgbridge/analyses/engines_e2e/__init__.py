"""The other engines end to end: each library's own llama.cpp logits processor (llama.cpp's GBNF
sampler through the real llama-server) generating on the matrix's models, judged by the real bytes
of the tokens it let through."""

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
        "cases.py",
        "generation.py",
        "judge.py",
        "synth.py",
        "analyses/engines/",
        "analyses/engines/adapters/",
        # a sidecar engine's pins (guidance's): its versions are not the venv's, which results
        # record, so a change of them must replan its rows as a change of code does
        "analyses/engines/sidecars/*.txt",
        "analyses/matrix/",
        # bug C's literal and the control probe are the compiled trace's and the engines'
        "analyses/native/",
        "soundness.py",
        # llama.cpp's GBNF sampler is asked through the server analysis's launcher, cases and judge
        "analyses/server/",
    ),
    EnginesE2ePayload,
    runs_on="matrix",
    whatif=False,
    packages=("lm-format-enforcer", "outlines", "outlines-core", "numba"),
    # the server build that answers the GBNF cases, and the schema converter that writes one of them
    built=(("data/native/server/bin", "llama-server-upstream-1.0.1"), ("data/native/server/bin", "schema-to-gbnf")),
    order=10,
    page=81,
)
