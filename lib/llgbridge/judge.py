"""The judge of a generation: its tokens to an outcome, by their real bytes.

The outcome (`judge`) is the case's own check of the output's bytes (`cases`); where an output
broke the grammar, the first token that did (`first_violation`) is found by the truth bridge (real
pieces, no forcing), never by the bridge that generated it, and the matrix records the text up to
it (`recorded_output`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from .bridges import Bridge, shared
from .cases import Case
from .errors import LlgError
from .generation import Generation
from .llg import mask_bits
from .vocab import Vocab


def judge(case: Case, g: Generation) -> str:
    text = g.output.decode("utf-8", "replace")
    if g.stop == "limit":
        if case.could_continue is not None and not case.could_continue(text):
            return "violation"
        return "truncated"
    return "pass" if case.check(text) else "violation"


TAIL_TOKENS = 8  # kept after the first violation, marked as a tail


_TRUTH: list[tuple[Vocab, Bridge]] = []  # one vocab at a time: the previous vocab and its bridge are freed
_TRUTH_LOCK = threading.Lock()


def _truth(vocab: Vocab) -> Bridge:
    """The truth bridge of `vocab`, built once and shared: a bridge is not changed by use (each
    caller walks a matcher of its own), and the load test's threads ask for it at once."""
    with _TRUTH_LOCK:
        if not _TRUTH or _TRUTH[0][0] is not vocab:
            # the kernel's own truth bridge where `vocab` is the one its analyses loaded (`bridges.shared`)
            _TRUTH[:] = [(vocab, shared(vocab, "truth"))]
        return _TRUTH[0][1]


def first_violation(vocab: Vocab, grammar: str, tokens: list[int]) -> int | None:
    """The index of the first token whose real bytes the grammar does not allow there, or None.

    Judged by the truth bridge (real pieces, no forcing): the point where the text stopped
    being a prefix of anything the grammar admits.
    """
    m = _truth(vocab).new_matcher(grammar)
    for i, t in enumerate(tokens):
        try:
            if not mask_bits(m.mask(), m.n_tokens)[t]:
                return i
            m.consume(t)
        except LlgError:
            return i
    return None


def recorded_output(vocab: Vocab, case: Case, g: Generation) -> str:
    """What the matrix records of an output: all of it when it never broke the grammar; else the
    text up to the first violation, then `TAIL_TOKENS` tokens marked as a tail.

    After a violation the text is whatever the model writes unconstrained; on random weights its
    near-ties break differently on another CPU, so the full text would not reproduce elsewhere.
    """
    if len(g.tokens) <= TAIL_TOKENS:
        return _recorded(vocab, g, None)  # a violation leaves at most TAIL_TOKENS after it: all of the text is kept
    return _recorded(vocab, g, first_violation(vocab, case.grammar, g.tokens))


def _recorded(vocab: Vocab, g: Generation, at: int | None) -> str:
    """`g`'s text as recorded, its first violation at token `at` (None: none)."""
    text = g.output.decode("utf-8", "backslashreplace")
    if at is None or len(g.tokens) - at <= TAIL_TOKENS:
        return text
    head = vocab.real_bytes(g.tokens[:at]).decode("utf-8", "backslashreplace")
    tail = vocab.real_bytes(g.tokens[at : at + TAIL_TOKENS]).decode("utf-8", "backslashreplace")
    return f"{head}{tail}…[{len(g.tokens) - at - TAIL_TOKENS} more tokens after the first violation at token {at}]"


@dataclass(frozen=True)
class Verdict:
    """One output judged: the case's outcome, the text recorded, the first violation."""

    outcome: str  # pass, violation, truncated (`judge`)
    shown: str  # the text recorded (`recorded_output`)
    first_violation: int | None  # the first token `grammar` does not allow there (truth bridge); None: none


def verdict(vocab: Vocab, case: Case, g: Generation, grammar: str) -> Verdict:
    """`g` judged by `case`'s check, its first violation of `grammar` found once, by the truth
    bridge, and its text recorded up to it. Shares nothing mutable between calls."""
    at = first_violation(vocab, grammar, g.tokens)
    return Verdict(judge(case, g), _recorded(vocab, g, at), at)
