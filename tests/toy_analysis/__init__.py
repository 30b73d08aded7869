"""A toy analysis, outside the library: the test that adding one touches no other file
(tests/test_toy_analysis.py copies this folder to a temporary package and names it in
LLGBRIDGE_ANALYSES). It counts a vocab's tokens and those whose piece starts with a space."""

from __future__ import annotations

from typing import TypedDict

from llgbridge.analyses import Analysis


class ToyRow(TypedDict):
    vocab: str
    n_tokens: int
    leading_space: int


# what an ok result holds: the check (`results.why_unusable`) requires each key and column, of its type
class ToyPayload(TypedDict):
    rows: list[ToyRow]


ANALYSIS = Analysis(
    "toy",
    (),
    ToyPayload,
    runs_on="every",
    whatif=True,
    order=50,
    page=85,
    notebook="toy.ipynb",
)
