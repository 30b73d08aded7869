"""One module per engine of `ENGINES` (`analyses.engines.compute`): each builds the engine's token table and
its masks by calling the library's own llama.cpp integration on a llama-cpp-python `Llama`.

An adapter module has `make_tokenizer_data(llm) -> TokenizerData` (what the engine's logits
processor is made from, not the processor itself); a `TokenizerData` holds `table` (token id -> the
bytes the engine's matcher holds for it, absent where the engine has no entry), `notes` (what the
integration said about itself, e.g. the probe token it tokenized) and `walker(pattern)`, which
gives a `Walker` at position 0 of a `Pattern` in the engine's own grammar language (the regex
form, or GBNF for llama.cpp's grammar sampler): `allowed()` (the
ids the engine's mask admits, ascending) and `advance(token)`. Nothing here re-implements the
library: a table is read back from the library's own objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Pattern:
    """One constraint in each engine's language: the same strings, written twice."""

    regex: str
    gbnf: str


class Walker(Protocol):
    def allowed(self) -> list[int]: ...

    def advance(self, token: int) -> None: ...


class TokenizerData(Protocol):
    table: dict[int, bytes]
    notes: dict[str, str]

    def walker(self, pattern: Pattern) -> Walker: ...
