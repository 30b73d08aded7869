"""The leak test (guide 4.4, 7.1): what each bridge lets through where the grammar forbids
whitespace, judged by real bytes.

A grammar that forbids whitespace, at position 0: which allowed tokens really contain a space, and
which allowed tokens are illegal at all. "Legal" is what llguidance computes from the *real* pieces
with byte forcing off (`bridges.Truth`), so the yardstick is llguidance itself, fed correct bytes.
One mask computation per bridge: milliseconds, after the bridge is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from ...bridges import Bridge, failed_rows
from ...errors import LlgError, cause_line
from ...vocab import Vocab
from . import LeakPayload


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


def leak_payload(
    vocab: Vocab,
    grammar: str,
    results: list[LeakResult],
    build_errors: dict[str, str],
    errors: dict[str, str] | None = None,
) -> LeakPayload:
    """The leak notebook's result (`results.SCHEMAS["leak"]`): rows per bridge (one for each that
    could not be built, and for each whose mask failed: `leak_tests`) and the leaked tokens."""
    out = {
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
    return cast(LeakPayload, out)
