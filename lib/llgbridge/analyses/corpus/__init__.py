"""The SchemaStore corpus through every bridge (`llgbridge.analyses.corpus.compute`)."""

from __future__ import annotations

from typing import Any, TypedDict

from ..registry import Analysis, BridgeRow, Ms


class CorpusRow(BridgeRow):
    schemas: int
    compiled: int
    under: int
    over: int


class CorpusFailure(BridgeRow):
    schema: str
    status: str


class CorpusRejection(TypedDict):
    schema: str
    status: str
    error: str
    vocabs: str
    bridges: str


class CorpusTiming(BridgeRow):
    masks: int
    mask_us_p50: Ms
    mask_us_p99: Ms


class CorpusPayload(TypedDict):
    schemas: int
    params: dict[str, Any]
    rows: list[CorpusRow]
    failures: list[CorpusFailure]
    rejected: list[CorpusRejection]
    timing: list[CorpusTiming]
    hist: dict[str, list[int]]
    hist_edges_us: list[float]


ANALYSIS = Analysis(
    "corpus",
    ("pool.py", "jobserver.py", "analyses/corpus/schemas.tsv", "soundness.py"),
    CorpusPayload,
    runs_on="corpus-sample",
    whatif=False,
    built=(("data/schemas", "*.json"),),
    order=10,
    page=110,
)
