"""The requests the server analysis sends: its cases, each as the body a client posts.

The matrix's cases (`cases.CASES`) go to the real `llama-server` (`server`) as the port's matrix
runs them, on the same models with the same prompts, and a few cases beyond them:

- the grammar cases go as `"grammar": "%llguidance {}\\n..."` to `/completion`;
- the JSON case goes as `"json_schema"` (the server's `json_schema_to_grammar` makes the grammar);
- a control case, `json_enum_gbnf`, sends the same schema as a plain GBNF `grammar` (converted
  by llama.cpp's own `json_schema_to_grammar` with `force_gbnf`): the guide's 3.1 claim that the GBNF
  path is untouched by either bug;
- every model also gets the JSON case through `/v1/chat/completions` with `response_format`
  `json_schema` (`json_enum_chat`), through its own chat template as the server renders it
  (ChatML, the server's default, for a GGUF without one). On this vendored llama.cpp that path
  does not reach llguidance: the chat code (`common/chat-auto-parser-generator.cpp`) turns the
  schema into GBNF with `build_grammar`, so this row is a second control on every vocab;
- a schema llguidance cannot compile (`rejected_schema`), and bug C's two roads: a literal
  spelling the end-of-turn token's text (`special_literal`), and a json_schema `pattern`
  spelling it (`special_pattern`).

Each case's `cases.Case` (`case_spec`, `judge_case`) is what `judge` judges its answer by. A
case is made once per model and build as an `Ask` (`asks_for`): the body every request of it
posts and the check its answer is judged by, so neither the requests nor the judge come back here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ... import cases as C
from ... import generation as G
from ...errors import InputError, first_line
from ...grammars import json_grammar, literal_grammar
from ...vocab import Vocab
from ..native.compute import special_literal, special_text
from . import llama_server as S

GBNF_CASE = "json_enum_gbnf"
CHAT_CASE = "json_enum_chat"
REJECTED_CASE = "rejected_schema"
SPECIAL_CASE = "special_literal"
SPECIAL_PATTERN_CASE = "special_pattern"  # bug C by another road: a json_schema `pattern` spelling the token
SPECIAL_CASES = (SPECIAL_CASE, SPECIAL_PATTERN_CASE)
EXTRA_CASES = (GBNF_CASE, CHAT_CASE, REJECTED_CASE, SPECIAL_CASE, SPECIAL_PATTERN_CASE)
# a schema llguidance cannot compile (a $ref to nothing): llama_sampler_llg_new logs the error and
# returns no matcher (common/llguidance.cpp:25-30), and the sampler it belongs to then lets every
# token through. A client should be told; `refused` when it is, `ignored` when the answer is
# HTTP 200 with unconstrained text
REJECTED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"colour": {"$ref": "#/$defs/missing"}},
    "required": ["colour"],
}


def gbnf_of(schema: dict[str, Any]) -> str:
    """The schema as GBNF, by llama.cpp's own `json_schema_to_grammar(schema, force_gbnf=true)`
    (`llama_server.GBNF_TOOL`). llama-cpp-python's Python port of it drops `minimum`/`maximum`, so its
    grammar admits counts the schema forbids."""
    return _gbnf(json.dumps(schema, sort_keys=True))


@lru_cache(maxsize=8)  # one converter run per schema: request_for is asked for every build and for the payload
def _gbnf(schema_json: str) -> str:
    import subprocess

    r = subprocess.run([str(S.GBNF_TOOL)], input=schema_json.encode(), capture_output=True, timeout=60)
    if r.returncode != 0:
        raise S.ServerError(f"schema-to-gbnf: {first_line(r.stderr.decode('utf-8', 'replace')) or r.returncode}")
    return r.stdout.decode()


def special_case(vocab: Vocab) -> C.Case | None:
    """Beyond the PR (bug C): a literal that spells the end-of-turn token's text inside plain
    text. `tokenize_fn` passes parse_special=true, so where it is kept (upstream; the fixed bridge
    on vocabs its probe calls exact) the forced bytes become the control token itself, and a
    decoder ends the turn there."""
    literal = special_literal(vocab)  # the native harness's bug C job walks the same string
    if not literal:
        return None
    text = special_text(vocab)
    return C.Case(
        SPECIAL_CASE,
        literal_grammar(literal),
        literal.__eq__,
        f"a literal spelling the special token {text!r} as text",
        literal.startswith,
    )


def special_pattern_schema(vocab: Vocab) -> dict[str, Any] | None:
    """Bug C by another road: a JSON string whose `pattern` spells the end-of-turn token's text and
    then `x` (`^<\\|eot_id\\|>x$` on llama-bpe). The server's schema-to-grammar forces the string's
    bytes, so where `tokenize_fn` parses special tokens the forced bytes become the control token.
    None where the vocab has no such text."""
    text = special_text(vocab)
    return {"type": "string", "pattern": "^" + re.escape(text) + "x$"} if text else None


def special_pattern_case(vocab: Vocab) -> C.Case | None:
    schema = special_pattern_schema(vocab)
    if schema is None:
        return None
    want = json.dumps(special_text(vocab) + "x")

    def check(s: str) -> bool:
        try:
            return json.loads(s) == special_text(vocab) + "x"
        except ValueError:
            return False

    return C.Case(
        SPECIAL_PATTERN_CASE,
        json_grammar(schema),
        check,
        f"a json_schema string whose pattern spells the special token {special_text(vocab)!r}",
        want.startswith,
    )


def case_spec(case: str, vocab: Vocab | None = None) -> C.Case:
    """The `cases.Case` of a server case: the matrix's own, the JSON case for the extra JSON
    cases, the vocab's special literal or pattern for the two bug C cases."""
    if case in SPECIAL_CASES:
        spec = (special_case if case == SPECIAL_CASE else special_pattern_case)(vocab) if vocab is not None else None
        if spec is None:
            raise InputError(f"case {case}", "the vocab has no end-of-turn token with printable text")
        return spec
    return judge_case(case)


def judge_case(case: str) -> C.Case:
    """The `cases.Case` whose check judges `case` (the extra cases judge as the JSON case; the
    rejected schema is judged by whether the server said so, in `ask`)."""
    if case == SPECIAL_CASE:
        return C.CASES["forced_literal"]  # its prompt: the special literal is judged by `case_spec`
    if case == SPECIAL_PATTERN_CASE:
        return C.CASES["json_enum"]  # its prompt: the pattern is judged by `case_spec`
    return C.CASES["json_enum" if case in EXTRA_CASES else case]


def violation_grammar(case: str) -> str:
    """The llguidance grammar whose truth mask finds an output's first violation. The GBNF and
    chat cases are judged against the plain schema (llguidance's flexible whitespace), since the
    server's GBNF allows whitespace the JSON case's compact option would not."""
    return json_grammar(C.JSON_SCHEMA) if case in EXTRA_CASES else C.CASES[case].grammar


def judged_by(case: str, spec: C.Case) -> str:
    """The grammar whose truth mask finds an answer's first violation: bug C's two cases their
    own (the vocab's), the others `violation_grammar`'s."""
    return spec.grammar if case in SPECIAL_CASES else violation_grammar(case)


@dataclass(frozen=True)
class Ask:
    """One case as a server is asked it, and how its answer is judged."""

    case: str  # "": the unconstrained request
    endpoint: str
    sent_as: str  # how the constraint is sent (`request_for`)
    body: Mapping[str, Any]  # read, never changed: the load test's threads post it at once
    spec: C.Case | None  # the check its answer is judged by (`case_spec`); None: the unconstrained request
    judged_by: str  # the grammar its first violation is found by (`judged_by`); "" unconstrained


def asks_for(
    cases: list[str], prompts: Mapping[str, G.Prompt], n_predict: int, seed: int, temperature: float, vocab: Vocab
) -> dict[str, Ask]:
    """Each of `cases`, then the unconstrained request ("", asked with the first case's prompt), as
    `vocab`'s model is asked them."""
    out: dict[str, Ask] = {}
    for c in [*cases, ""]:
        prompt = prompts[c] if c else prompts.get(cases[0], G.PLAIN) if cases else G.PLAIN
        endpoint, sent_as, body = request_for(c, prompt, n_predict, seed, temperature, vocab)
        spec = case_spec(c, vocab) if c else None
        out[c] = Ask(c, endpoint, sent_as, body, spec, judged_by(c, spec) if spec else "")
    return out


def request_for(
    case: str, prompt: G.Prompt, n_predict: int, seed: int, temperature: float, vocab: Vocab | None = None
) -> tuple[str, str, dict[str, Any]]:
    """(endpoint, how the constraint is sent, body) for one case."""
    common: dict[str, Any] = {
        "n_predict": n_predict,
        "temperature": temperature,
        "seed": seed,
        "return_tokens": True,
        "cache_prompt": False,
    }
    if case == CHAT_CASE:
        c = C.CASES["json_enum"]
        return (
            "/v1/chat/completions",
            "response_format",
            {
                "messages": [{"role": "user", "content": c.instruction}],
                "max_tokens": n_predict,
                "temperature": temperature,
                "seed": seed,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "answer", "schema": {**C.JSON_SCHEMA, **C.JSON_OPTIONS}},
                },
                # the chat endpoint returns its tokens only with their probabilities: they are the
                # cross-check of its text (`content_match`)
                "logprobs": True,
                "top_logprobs": 1,
            },
        )
    body = {"prompt": prompt.text, **common}
    if case == REJECTED_CASE:
        return "/completion", "json_schema", {**body, "json_schema": REJECTED_SCHEMA}
    if case == "json_enum":
        return "/completion", "json_schema", {**body, "json_schema": {**C.JSON_SCHEMA, **C.JSON_OPTIONS}}
    if case == SPECIAL_PATTERN_CASE:
        schema = special_pattern_schema(vocab) if vocab is not None else None
        return "/completion", "json_schema", {**body, "json_schema": schema or {}}
    if case == GBNF_CASE:
        return "/completion", "grammar (GBNF)", {**body, "grammar": gbnf_of(C.JSON_SCHEMA)}
    if case == "":
        return "/completion", "none", body
    grammar = (
        case_spec(case, vocab).grammar
        if case == SPECIAL_CASE and vocab is not None
        else (C.CASES[case].grammar if case in C.CASES else "")
    )
    return "/completion", "grammar (%llguidance)", {**body, "grammar": "%llguidance {}\n" + grammar}


def prompts_for(chat: G.Chat, cases: list[str], style: str) -> dict[str, G.Prompt]:
    """The port's matrix prompts (`generation.prompt_for`), the extra cases taking the JSON case's."""
    return {c: G.prompt_for(chat, judge_case(c), style) for c in cases}


def curl_for(endpoint: str, body: dict[str, Any], base: str = "http://127.0.0.1:8080") -> str:
    """A request as a maintainer pastes it into a shell."""
    import shlex

    return (
        f"curl -s {base}{endpoint} -H 'Content-Type: application/json' -d "
        f"{shlex.quote(json.dumps(body, ensure_ascii=False))}"
    )
