"""The real llama-server answering the guide's requests (`llgbridge.analyses.server.compute`)."""

from __future__ import annotations

from typing import Any, TypedDict

from ..registry import Analysis, Num


class ServerAnswer(TypedDict):
    """One request: a model, an llguidance, a sampler and a case."""

    model: str
    vocab: str
    llguidance: str
    sampler: str
    case: str
    http_status: int
    error_field: bool
    outcome: str


class ServerLoad(TypedDict):
    model: str
    llguidance: str
    sampler: str
    requests: int
    violations: int
    healthy_after: bool


class ServerPayload(TypedDict):
    rows: list[ServerAnswer]
    tokens: list[list[int]]
    load: list[ServerLoad]
    llguidance: list[str]
    port_llguidance: str
    builds: dict[str, str]
    cases: dict[str, dict[str, Any]]
    temperature: Num
    seed: int


ANALYSIS = Analysis(
    "server",
    # the matrix's: the model it serves is the one the matrix runs (`matrix.model_paths`)
    (
        "generate.py",
        "cases.py",
        "generation.py",
        "judge.py",
        "synth.py",
        "analyses/native/",
        "soundness.py",
        "analyses/matrix/",
    ),
    ServerPayload,
    runs_on="server",
    whatif=True,
    built=(("data/native/server/bin", "*"),),
    gpu=True,
    order=11,
    page=70,
)
