"""The probe (guide 5.1, 5.3, 6): is `llama_tokenize` byte-exact, as llguidance's `tokenize_fn`?

The PR decides once per vocab whether to keep `llama_tokenize` as `tokenize_fn`:

- `probe_tokenize_exact`: the PR's `llama_sampler_llg_tokenize_is_exact`, three probes
  round-tripped through `llama_tokenize` and `llama_token_to_piece`; the fixed bridge keeps
  `tokenize_fn` only when it says exact, else llguidance's greedy tokenizer (no byte forcing);
- `tokenize_cases`: the state behind the verdict, what `llama_tokenize` returns for the probes
  and a word, with and without `add_special` (guide 5.1: `"The"` -> `[450] ' The'` on SPM);
- `probe_row`: the verdict and what follows from it, one row per vocab (`probe.csv`).

Costs a handful of `llama_tokenize` calls: microseconds.

But: three probes are a sample, not a proof; `exactness.probe_vs_exactness` sets the verdict
against many seeded inputs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .vocab import Vocab

# The PR's probes (guide 5.3): "The" catches the SPM space prefix, "a b" interior
# whitespace, "1\n2" newline mangling.
PROBES: tuple[bytes, ...] = (b"The", b"a b", b"1\n2")


@dataclass(frozen=True)
class ProbeResult:
    exact: bool
    failed_probe: bytes | None = None  # the first probe that did not round-trip
    got: bytes | None = None  # what the round trip gave for it
    tokens: tuple[int, ...] = ()
    error: str | None = None  # a tokenize or piece error (the probe fails safe)


def probe_tokenize_exact(vocab: Vocab, probes: tuple[bytes, ...] = PROBES, parse_special: bool = True) -> ProbeResult:
    """The PR's `llama_sampler_llg_tokenize_is_exact` (guide 5.3).

    Tokenizes each probe as `tokenize_fn` would (`add_special=false, parse_special=true`; the
    `nospecial` candidate passes false, as its tokenize_fn does) and
    reassembles the tokens with `llama_token_to_piece(lstrip=0, special=false)`. Any failure,
    including an error, makes the vocab inexact: the probe fails safe.
    """
    for p in probes:
        try:
            toks = vocab.tokenize(p, add_special=False, parse_special=parse_special)
            got = vocab.real_bytes(toks)
        except Exception as e:  # noqa: BLE001 - fail safe, as the C++ probe does
            return ProbeResult(False, p, None, (), f"{type(e).__name__}: {e}")
        if got != p:
            return ProbeResult(False, p, got, tuple(toks))
    return ProbeResult(True)


@dataclass
class TokenizeCase:
    text: bytes
    add_special: bool
    tokens: list[int]
    pieces: list[bytes]

    @property
    def exact(self) -> bool:
        """The real bytes of the tokens equal the input (special tokens add none)."""
        return b"".join(self.pieces) == self.text

    def row(self) -> dict[str, Any]:
        return {
            "text": self.text.decode("utf-8", "backslashreplace"),
            "add_special": self.add_special,
            "tokens": " ".join(map(str, self.tokens)),
            "pieces": json.dumps([p.decode("utf-8", "backslashreplace") for p in self.pieces], ensure_ascii=False),
            "exact": self.exact,
        }


def tokenize_cases(vocab: Vocab, texts: list[bytes]) -> list[TokenizeCase]:
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


def payload(literal: str, verdict: dict[str, Any], cases: list[TokenizeCase]) -> dict[str, Any]:
    """The probe notebook's result: the verdict row and the tokenizer cases behind it."""
    return {"literal": literal, "probe": verdict, "cases": [c.row() for c in cases]}


__all__ = ["PROBES", "ProbeResult", "probe_tokenize_exact", "TokenizeCase", "tokenize_cases", "probe_row", "payload"]
