"""lm-format-enforcer's llama.cpp integration (`lmformatenforcer/integrations/llamacpp.py`).

`build_token_enforcer_tokenizer_data(llm)` makes the table: for every token but BOS and EOS,
`llm.detokenize([token_0, t]).decode("utf-8")[1:]` with `token_0 = llm.tokenize(b"0")[-1]`
(prefix a token, strip one character), and `"�"` where that raises. The mask is its
`TokenEnforcer` with a `RegexParser`, the pair `build_llamacpp_logits_processor` makes.
"""

from __future__ import annotations

from typing import Any

from lmformatenforcer import RegexParser, TokenEnforcer
from lmformatenforcer.integrations.llamacpp import build_token_enforcer_tokenizer_data

from . import Pattern


class LmfeWalker:
    def __init__(self, data: Any, regex: str) -> None:
        self._enforcer = TokenEnforcer(data, RegexParser(regex))
        # the token sequence the logits processor is called with; an empty one is the first step
        self._seq: list[int] = []

    def allowed(self) -> list[int]:
        return sorted(int(t) for t in self._enforcer.get_allowed_tokens(self._seq).allowed_tokens)

    def advance(self, token: int) -> None:
        self._seq.append(token)


class LmfeTokenizerData:
    def __init__(self, llm: Any) -> None:
        self.data = build_token_enforcer_tokenizer_data(llm)
        self.table = {int(t): s.encode("utf-8") for t, s, _ in self.data.regular_tokens}
        # the token the integration prefixes to every token (its own expression): the strip of one
        # character is right only when that token's text is the one character "0". On a vocab whose
        # tokenize appends an end token (bert-bge: [101, 1014, 102]) it is that token, with no text
        probe = [int(t) for t in llm.tokenize(b"0")]
        token_0 = probe[-1]
        self.notes = {
            "prefix_tokens": " ".join(map(str, probe)),
            "prefix_token": str(token_0),
            "prefix_text": llm.detokenize([token_0]).decode("utf-8", "replace"),
        }

    def walker(self, pattern: Pattern) -> LmfeWalker:
        return LmfeWalker(self.data, pattern.regex)


def make_tokenizer_data(llm: Any) -> LmfeTokenizerData:
    return LmfeTokenizerData(llm)
