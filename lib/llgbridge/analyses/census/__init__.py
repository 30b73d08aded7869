"""The byte-diff census: every token's bytes in the bridge's table against llama_token_to_piece's."""

from __future__ import annotations

from ..registry import Analysis, Schema

ANALYSIS = Analysis(
    "census",
    (),
    Schema(
        {"summary": dict, "diffs": list},
        {"summary": {"vocab": str, "differing": int, "n_tokens": int, "lost_leading_space": int}},
    ),
    runs_on="every",
    whatif=True,
    order=1,
    page=10,
)
