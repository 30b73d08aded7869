"""A toy analysis, outside the library: the test that adding one touches no other file
(tests/test_toy_analysis.py copies this folder to a temporary package and names it in
LLGBRIDGE_ANALYSES). It counts a vocab's tokens and those whose piece starts with a space."""

from __future__ import annotations

from llgbridge.analyses import Analysis, Schema

ANALYSIS = Analysis(
    "toy",
    (),
    Schema({"rows": list}, {"rows": {"vocab": str, "n_tokens": int, "leading_space": int}}),
    runs_on="every",
    whatif=True,
    order=50,
    page=85,
    notebook="toy.ipynb",
)
