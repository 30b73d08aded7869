"""The forced-mask test (guide 5.1, 7.2): a grammar admitting one literal, judged by real bytes.

Every allowed token's real bytes must be a prefix of the literal. Then the matcher is followed as
llama.cpp would (consume a token, compute the next mask) and the first llguidance error is kept
verbatim: that error is how the matcher dies and llama.cpp silently drops the constraint. A few
mask computations per bridge: milliseconds, after the bridge is built.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, cast

from ...bridges import Bridge, failed_rows
from ...errors import LlgError, first_line
from ...grammars import literal_grammar
from ...llg import Matcher
from . import ForcedPayload


@dataclass
class Step:
    step: int
    allowed: int  # how many tokens the mask allowed
    token: int | None  # the token consumed (the first allowed one), None when none
    piece: bytes = b""  # its real bytes


@dataclass
class ForcedResult:
    vocab: str
    bridge: str
    literal: str
    forcing: bool
    allowed: list[int]  # at position 0, ascending ids
    pieces: list[bytes]  # their real bytes
    not_prefix: list[int]  # allowed tokens whose real bytes are not a prefix of the literal
    steps: list[Step] = field(default_factory=list)
    error: str = ""  # the first llguidance error met while following the matcher, verbatim
    error_step: int | None = None
    output: bytes = b""  # the real bytes of the tokens consumed

    @property
    def output_ok(self) -> bool:
        return self.output == self.literal.encode()

    def row(self) -> dict[str, Any]:
        return {
            "vocab": self.vocab,
            "bridge": self.bridge,
            "allowed": len(self.allowed),
            "not_prefix": len(self.not_prefix),
            "pieces": json.dumps([p.decode("utf-8", "backslashreplace") for p in self.pieces], ensure_ascii=False),
            "error": first_line(self.error),
            "error_step": "" if self.error_step is None else self.error_step,
            "output": self.output.decode("utf-8", "backslashreplace"),
            "output_ok": self.output_ok,
            "forcing": self.forcing,
        }


def _mask_or_error(m: Matcher) -> tuple[list[int] | None, str]:
    try:
        return m.allowed(), ""
    except LlgError as e:
        return None, str(e)


def forced_test(bridge: Bridge, literal: str, max_steps: int = 64) -> ForcedResult:
    """The allowed set at position 0 of a one-literal grammar, then the matcher followed.

    Following: at each step compute the mask, consume the first allowed token (lowest id),
    stop at the first error, when the matcher stops, or after `max_steps`.
    """
    v = bridge.vocab
    target = literal.encode()
    m = bridge.new_matcher(literal_grammar(literal))
    allowed, err = _mask_or_error(m)
    allowed = allowed or []
    pieces = [v.token_to_piece(t) for t in allowed]
    r = ForcedResult(
        vocab=v.name,
        bridge=bridge.name,
        literal=literal,
        forcing=bridge.forcing,
        allowed=allowed,
        pieces=pieces,
        not_prefix=[t for t, p in zip(allowed, pieces) if not (p and target.startswith(p))],
    )
    if err:
        r.error, r.error_step = err, 0
        return r
    step_allowed: list[int] | None = allowed
    for i in range(max_steps):
        if m.is_stopped:
            break
        if i > 0:
            step_allowed, err = _mask_or_error(m)
            if err:
                r.error, r.error_step = err, i
                break
        assert step_allowed is not None
        eos = [t for t in step_allowed if t == v.eos or t == v.eot]
        choice = [t for t in step_allowed if t not in eos]
        if not choice:
            r.steps.append(Step(i, len(step_allowed), None))
            break
        tok = choice[0]
        piece = v.token_to_piece(tok)
        r.steps.append(Step(i, len(step_allowed), tok, piece))
        r.output += piece
        try:
            m.consume(tok)
        except LlgError as e:
            r.error, r.error_step = str(e), i
            break
    return r


def forced_payload(
    literal: str, results: list[ForcedResult], build_errors: dict[str, str], vocab: str
) -> ForcedPayload:
    """The forced notebook's result: rows per bridge, the allowed pieces, and the walk."""

    def text(b: bytes) -> str:
        return b.decode("utf-8", "backslashreplace")

    out = {
        "literal": literal,
        "rows": [r.row() for r in results] + failed_rows(vocab, build_errors),
        "allowed": {r.bridge: [{"token": t, "piece": text(p)} for t, p in zip(r.allowed, r.pieces)] for r in results},
        "errors": {r.bridge: r.error for r in results},
        "steps": {
            r.bridge: [
                {"step": s.step, "allowed": s.allowed, "token": s.token, "piece": text(s.piece)} for s in r.steps
            ]
            for r in results
        },
    }
    return cast(ForcedPayload, out)
