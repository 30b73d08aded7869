"""outlines' llama.cpp integration (`outlines/models/llamacpp.py`) and its outlines-core backend.

`outlines.from_llamacpp(llm)` makes `LlamaCppTokenizer`, whose `vocabulary` is a `dict` text -> id
built from `llama_token_to_piece(vocab, t, buf, n, 0, True)` decoded with `errors="replace"`;
`OutlinesCoreBackend(model)` turns it into outlines-core's `Vocabulary` (the EOS text popped),
and a regex becomes `Index(regex, vocabulary)` walked by a `Guide`, as its logits processor does.
"""

from __future__ import annotations

from typing import Any

import outlines
from outlines.backends.outlines_core import OutlinesCoreBackend
from outlines_core import Guide, Index

from . import Pattern


class OutlinesWalker:
    def __init__(self, vocabulary: Any, regex: str) -> None:
        self._guide = Guide(Index(regex, vocabulary))

    def allowed(self) -> list[int]:
        return sorted(int(t) for t in self._guide.get_tokens())

    def advance(self, token: int) -> None:
        self._guide.advance(token)


class OutlinesTokenizerData:
    def __init__(self, llm: Any) -> None:
        model = outlines.from_llamacpp(llm)
        backend = OutlinesCoreBackend(model)
        self.vocabulary = backend.vocabulary
        # read back from outlines-core's own Vocabulary: an id counts as held only where the
        # Vocabulary lists it under that text
        self.table = {
            int(i): text.encode("utf-8")
            for text, i in model.tokenizer.vocabulary.items()
            if i in (self.vocabulary.get(text) or [])
        }
        self.notes = {"eos": str(backend.eos_token_id)}

    def walker(self, pattern: Pattern) -> OutlinesWalker:
        return OutlinesWalker(self.vocabulary, pattern.regex)


def make_tokenizer_data(llm: Any) -> OutlinesTokenizerData:
    return OutlinesTokenizerData(llm)
