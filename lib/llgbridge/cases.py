"""The cases the matrix and the server ask, each what is asked and how its answer is judged.

A case is a grammar (lark, as the server hands it to `llama_sampler_init_llg`), the prompts a real
model is given for it (an instruction through a chat template, or a completion), and an independent
check of a finished output (exact string, `json` + `jsonschema`, `re`), never llguidance; where it is
decidable, whether a truncated output could still be completed (`could_continue`). The judge of a
generation (`judge`) applies them by the output's real bytes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .grammars import FORCED_LITERAL, json_grammar, literal_grammar


@dataclass(frozen=True)
class Case:
    name: str
    grammar: str  # a lark grammar, as the server hands it to llama_sampler_init_llg
    check: Callable[[str], bool]  # the independent judge of a finished output
    description: str
    could_continue: Callable[[str], bool] | None = None  # for truncated outputs, when decidable
    instruction: str = ""  # what a real instruct model is asked, through its chat template
    completion: str = ""  # the plain prompt a real pretrained model continues


JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "colour": {"type": "string", "enum": ["red", "green", "chartreuse"]},
        "count": {"type": "integer", "minimum": 0, "maximum": 99},
    },
    "required": ["colour", "count"],
    "additionalProperties": False,
}
# The server's schema grammar (`grammars.json_grammar`) plus llguidance's compact-whitespace
# option, so a random-weight model cannot loop on whitespace: the one departure from the
# server's defaults.
JSON_OPTIONS = {"x-guidance": {"whitespace_flexible": False}}
HALF_FREE_RE = r"BEGIN\[[a-z]{1,8}\] END"
NO_SPACE_RE = r"[a-z]{1,10}(,[a-z]{1,10}){2}"


def _json_ok(text: str) -> bool:
    import jsonschema

    try:
        jsonschema.validate(json.loads(text), JSON_SCHEMA)
    except (ValueError, jsonschema.ValidationError):
        return False
    return True


def _half_free_prefix(s: str) -> bool:
    """Can `s` still grow into a HALF_FREE_RE match?"""
    head = "BEGIN["
    if len(s) <= len(head):
        return head.startswith(s)
    if not s.startswith(head):
        return False
    m = re.match(r"[a-z]{0,8}", s[len(head) :])
    assert m is not None
    rest = s[len(head) + m.end() :]
    return rest == "" or (m.end() >= 1 and "] END".startswith(rest))


CASES: dict[str, Case] = {
    "forced_literal": Case(
        "forced_literal",
        literal_grammar(FORCED_LITERAL),
        lambda s: s == FORCED_LITERAL,
        f"a grammar admitting exactly {FORCED_LITERAL!r}",
        lambda s: FORCED_LITERAL.startswith(s),
        instruction=f"Reply with exactly these two words in lowercase and nothing else: {FORCED_LITERAL}",
        completion='The first program everyone writes prints two words, "',
    ),
    "json_enum": Case(
        "json_enum",
        json_grammar({**JSON_SCHEMA, **JSON_OPTIONS}),
        _json_ok,
        "a JSON schema with an enum string and a bounded integer, as the server sends it",
        instruction="Reply with a JSON object giving a colour and a count.",
        completion='A JSON object giving a colour and a count: {"colour": "red", "count": 3}\nAnother one: ',
    ),
    "half_free": Case(
        "half_free",
        'start: "BEGIN[" /[a-z]{1,8}/ "] END"',
        lambda s: re.fullmatch(HALF_FREE_RE, s) is not None,
        "a forced skeleton around a free regex region",
        _half_free_prefix,
        instruction="Name one animal in lowercase, written as BEGIN[name] END, and nothing else.",
        completion="Animals, one per line, as BEGIN[name] END:\nBEGIN[cat] END\n",
    ),
    "dots": Case(
        "dots",
        'start: /[.]{2,6}/ "!"',
        lambda s: re.fullmatch(r"[.]{2,6}!", s) is not None,
        "a regex region of dots only: built so that upstream's space-stripped tokens (' .', ' ..') are a real choice",
        lambda s: re.fullmatch(r"[.]{0,6}!?", s) is not None,
        instruction="Reply with three dots followed by an exclamation mark, and nothing else.",
        completion="Three dots and then an exclamation mark: ",
    ),
    "no_space": Case(
        "no_space",
        f"start: /{NO_SPACE_RE}/",
        lambda s: re.fullmatch(NO_SPACE_RE, s) is not None,
        "three words separated by commas and no space: where a real model wants ', ' the grammar forbids the space",
        lambda s: re.fullmatch(r"([a-z]{1,10},){0,2}[a-z]{0,10}", s) is not None,
        instruction="List three colours, separated by commas, on one line.",
        completion="The three primary colours, separated by commas: ",
    ),
}
