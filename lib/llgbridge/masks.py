"""Mask analyses (guide 4.4, 5.1, 5.3, 6, 7): what each bridge lets through, judged by real bytes.

- `leak_test` (guide 4.4, 7.1): a grammar that forbids whitespace, at position 0. Which allowed
  tokens really contain a space, and which allowed tokens are illegal at all. "Legal" is what
  llguidance computes from the *real* pieces with byte forcing off (`bridges.Truth`), so the
  yardstick is llguidance itself, fed correct bytes.
- `forced_test` (guide 5.1, 7.2): a grammar admitting one literal. Every allowed token's real
  bytes must be a prefix of the literal. Then the matcher is followed as llama.cpp would
  (consume a token, compute the next mask) and the first llguidance error is kept verbatim:
  that error is how the matcher dies and llama.cpp silently drops the constraint.
- `tokenizer_state` (guide 5.1): what `llama_tokenize` returns for the probes and a word.

Each costs one or a few mask computations: milliseconds, after the bridge is built.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .bridges import PROBES, Bridge, Matcher, probe_tokenize_exact
from .errors import LlgError
from .vocab import Vocab


def first_line(msg: str | None) -> str:
    return (msg or "").strip().splitlines()[0] if (msg or "").strip() else ""


def literal_grammar(literal: str) -> str:
    """A lark grammar admitting exactly `literal` (a JSON string literal is a lark string)."""
    return f"start: {json.dumps(literal, ensure_ascii=False)}"


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
    v = bridge.vocab
    allowed = bridge.new_matcher(grammar).allowed()
    legal = set(truth.new_matcher(grammar).allowed())
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
    stopped: bool = False

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
            r.stopped = True
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
            r.stopped = True
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


@dataclass
class TokenizeCase:
    text: bytes
    add_special: bool
    tokens: list[int]
    pieces: list[bytes]

    @property
    def exact(self) -> bool:
        """The real bytes of the tokens equal the input (special tokens excluded)."""
        return b"".join(self.pieces) == self.text

    def row(self) -> dict[str, Any]:
        return {
            "text": self.text.decode("utf-8", "backslashreplace"),
            "add_special": self.add_special,
            "tokens": " ".join(map(str, self.tokens)),
            "pieces": json.dumps([p.decode("utf-8", "backslashreplace") for p in self.pieces], ensure_ascii=False),
            "exact": self.exact,
        }


def tokenizer_state(vocab: Vocab, texts: list[bytes]) -> list[TokenizeCase]:
    """`llama_tokenize(text, add_special, parse_special=true)` for each text, both ways."""
    out = []
    for text in texts:
        for add_special in (False, True):
            toks = vocab.tokenize(text, add_special=add_special, parse_special=True)
            out.append(TokenizeCase(text, add_special, toks, [vocab.token_to_piece(t) for t in toks]))
    return out


def probe_row(vocab: Vocab) -> dict[str, Any]:
    """The PR's three-probe verdict and what follows from it (guide 5.3, 6)."""
    p = probe_tokenize_exact(vocab)
    return {
        "vocab": vocab.name,
        "vocab_type": vocab.vocab_type,
        "tokenize_exact": p.exact,
        "failed_probe": "" if p.failed_probe is None else p.failed_probe.decode(),
        "got": "" if p.got is None else p.got.decode("utf-8", "backslashreplace"),
        "tokens": " ".join(map(str, p.tokens)),
        "error": p.error or "",
        "greedy": not p.exact,
        "byte_forcing": p.exact,
    }


__all__ = ["PROBES", "leak_test", "forced_test", "tokenizer_state", "probe_row", "literal_grammar"]
