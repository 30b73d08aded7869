"""The toy's computation: one row per vocab."""

from __future__ import annotations

from typing import Any

from llgbridge.vocab import Vocab


def payload(v: Vocab) -> dict[str, Any]:
    pieces = list(v.iter_pieces())
    return {"rows": [{"vocab": v.name, "n_tokens": len(pieces), "leading_space": sum(p[:1] == b" " for p in pieces)}]}
