"""The byte-diff census: every token's bytes in the bridge's table against llama_token_to_piece's."""

from __future__ import annotations

from typing import Any, TypedDict

from ..registry import Analysis


class CensusSummary(TypedDict):
    vocab: str
    differing: int
    n_tokens: int
    lost_leading_space: int


class CensusPayload(TypedDict):
    summary: CensusSummary
    diffs: list[dict[str, Any]]


ANALYSIS = Analysis(
    "census",
    (),
    CensusPayload,
    runs_on="every",
    whatif=True,
    order=1,
    page=10,
)
