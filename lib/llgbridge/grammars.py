"""The grammars the analyses hand llguidance, and the guide's two defaults.

Lark text, as llama.cpp hands it to `llama_sampler_init_llg(vocab, "lark", ...)`
(common/sampling.cpp:215); a JSON schema becomes `%llguidance {}\nstart: %json SCHEMA`, the
string `json_schema_to_grammar` emits under LLAMA_USE_LLGUIDANCE
(common/json-schema-to-grammar.cpp:1158, guide 3.1).
"""

from __future__ import annotations

import json
from typing import Any

# guide 4.4 / 7.1: forbids whitespace and leaves real choice at position 0, so the mask comes
# from the token trie (a literal would be forced: guide 4.4's last paragraph)
LEAK_GRAMMAR = 'start: /[.a-z]{2,6}/ "!"'
# guide 5.1 / 7.2: the one string the forced-mask test's grammar admits
FORCED_LITERAL = "hello world"


def literal_grammar(literal: str) -> str:
    """A lark grammar admitting exactly `literal` (a JSON string literal is a lark string)."""
    return f"start: {json.dumps(literal, ensure_ascii=False)}"


def json_grammar(schema: dict[str, Any]) -> str:
    """A JSON schema as the server hands it over, with llguidance's default options.

    llguidance options go inside the schema (`"x-guidance": {...}`), as llguidance reads them.
    """
    return "%llguidance {}\nstart: %json " + json.dumps(schema)
