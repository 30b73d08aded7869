"""Mask analyses (guide 4.4, 5.1, 7): what each bridge lets through, judged by real bytes.

- `leak_test` (guide 4.4, 7.1): a grammar that forbids whitespace, at position 0. Which allowed
  tokens really contain a space, and which allowed tokens are illegal at all. "Legal" is what
  llguidance computes from the *real* pieces with byte forcing off (`bridges.Truth`), so the
  yardstick is llguidance itself, fed correct bytes.
- `forced_test` (guide 5.1, 7.2): a grammar admitting one literal. Every allowed token's real
  bytes must be a prefix of the literal. Then the matcher is followed as llama.cpp would
  (consume a token, compute the next mask) and the first llguidance error is kept verbatim:
  that error is how the matcher dies and llama.cpp silently drops the constraint.

Each costs one or a few mask computations: milliseconds, after the bridge is built.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .bridges import Bridge, failed_rows
from .errors import LlgError, cause_line, first_line
from .grammars import literal_grammar
from .llg import Matcher
from .vocab import Vocab


@dataclass
class LeakResult:
    vocab: str
    bridge: str
    grammar: str
    forcing: bool
    allowed: list[int]
    with_space: list[int]  # allowed tokens whose real piece contains a space
    illegal: list[int]  # allowed, but the real-bytes mask does not allow them
    legal_masked: list[int]  # allowed by the real-bytes mask, masked by this bridge

    def row(self) -> dict[str, Any]:
        return {
            "vocab": self.vocab,
            "bridge": self.bridge,
            "allowed": len(self.allowed),
            "allowed_with_space": len(self.with_space),
            "allowed_illegal": len(self.illegal),
            "legal_masked": len(self.legal_masked),
            "forcing": self.forcing,
        }


def leak_test(bridge: Bridge, truth: Bridge, grammar: str) -> LeakResult:
    """Allowed tokens at position 0 of `grammar`, judged by their real bytes."""
    return _leak_result(
        bridge, grammar, bridge.new_matcher(grammar).allowed(), set(truth.new_matcher(grammar).allowed())
    )


def _leak_result(bridge: Bridge, grammar: str, allowed: list[int], legal: set[int]) -> LeakResult:
    v = bridge.vocab
    return LeakResult(
        vocab=v.name,
        bridge=bridge.name,
        grammar=grammar,
        forcing=bridge.forcing,
        allowed=allowed,
        with_space=[t for t in allowed if b" " in v.token_to_piece(t)],
        illegal=[t for t in allowed if t not in legal],
        legal_masked=sorted(legal.difference(allowed)),
    )


def leak_tests(built: dict[str, Bridge], truth: Bridge, grammar: str) -> tuple[list[LeakResult], dict[str, str]]:
    """`leak_test` for each built bridge, in order, and the one-line error of each whose mask
    llguidance refused: one bridge's error costs its row (`error_rows`), never the other
    bridges' results (on an all-control vocab no token can start any text: every mask fails).
    The truth's mask is computed once for all the bridges, each bridge's once."""
    try:
        legal = set(truth.new_matcher(grammar).allowed())
        judge = ""
    except LlgError as e:
        legal, judge = set(), f"the truth's mask failed, so nothing it allows can be judged: {cause_line(str(e))}"
    out: list[LeakResult] = []
    errors: dict[str, str] = {}
    for name, b in built.items():
        try:
            allowed = b.new_matcher(grammar).allowed()
        except LlgError as e:
            errors[name] = f"its mask failed: {cause_line(str(e))}"
            continue
        if judge:
            errors[name] = judge
            continue
        out.append(_leak_result(b, grammar, allowed, legal))
    return out, errors


def error_rows(vocab: str, errors: dict[str, str]) -> list[dict[str, Any]]:
    """A row per bridge that was built but whose analysis llguidance refused, with its one-line reason."""
    return [{"vocab": vocab, "bridge": name, "error": msg} for name, msg in errors.items()]


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


def leak_payload(
    vocab: Vocab,
    grammar: str,
    results: list[LeakResult],
    build_errors: dict[str, str],
    errors: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The leak notebook's result (`results.SCHEMAS["leak"]`): rows per bridge (one for each that
    could not be built, and for each whose mask failed: `leak_tests`) and the leaked tokens."""
    return {
        "grammar": grammar,
        "rows": [r.row() for r in results]
        + failed_rows(vocab.name, build_errors)
        + error_rows(vocab.name, errors or {}),
        "leaked": {
            r.bridge: [
                {
                    "token": t,
                    "piece": vocab.token_to_piece(t).decode("utf-8", "backslashreplace"),
                    "space": t in r.with_space,
                }
                for t in r.illegal
            ]
            for r in results
        },
    }


def forced_payload(
    literal: str, results: list[ForcedResult], build_errors: dict[str, str], vocab: str
) -> dict[str, Any]:
    """The forced notebook's result: rows per bridge, the allowed pieces, and the walk."""

    def text(b: bytes) -> str:
        return b.decode("utf-8", "backslashreplace")

    return {
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


__all__ = [
    "leak_test",
    "leak_tests",
    "error_rows",
    "forced_test",
    "leak_payload",
    "forced_payload",
    "LeakResult",
    "ForcedResult",
    "Step",
]
