"""The end-to-end matrix: every model x bridge x case, generated and judged by bytes."""

from __future__ import annotations

from typing import TypedDict

from ..registry import Analysis, Num


class MatrixCell(TypedDict):
    """One model, case and bridge."""

    model: str
    vocab: str
    case: str
    bridge: str
    outcome: str


class MatrixPayload(TypedDict):
    rows: list[MatrixCell]
    device: str
    n_gpu_layers: int
    temperature: Num
    seed: int
    max_tokens: int


ANALYSIS = Analysis(
    "matrix",
    ("generate.py", "cases.py", "generation.py", "judge.py", "synth.py"),
    MatrixPayload,
    runs_on="matrix",
    whatif=True,
    gpu=True,
    order=9,
    page=60,
)
