"""The toy's computation: one row per vocab."""

from __future__ import annotations

from llgbridge.vocab import Vocab

from . import ToyPayload


def payload(v: Vocab) -> ToyPayload:
    pieces = list(v.iter_pieces())
    return {"rows": [{"vocab": v.name, "n_tokens": len(pieces), "leading_space": sum(p[:1] == b" " for p in pieces)}]}
