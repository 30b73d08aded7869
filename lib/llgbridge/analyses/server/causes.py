"""Why llama-server refused a request, named from its own message and log.

A server error (an HTTP 4xx/5xx, an `error` field, or no answer) is never only "error": `cause_of`
reads the reply's message, the lines the server logged while it answered (`server.ask` keeps
them) and the vocab the server loaded, and names the cause in one sentence by the first rule of
`RULES` that applies. Where none does, the cause is "cause not classified" with the server's own
message and its error lines: a failure no rule foresaw still says what happened.

The chat endpoint's refusal (`prefill_space`) is named from what llama.cpp did, not from the
vocab's type: `common_sampler_init` (common/sampling.cpp) tokenizes the chat template's
generation prompt with `common_tokenize(vocab, prompt, false, true)`, skips the first token when
its piece begins with a space the prompt does not have, and feeds the rest to the grammar, whose
root begins with that prompt. Where the vocab's space prefix merged into the first piece (`' <'`),
the skip drops the prompt's first byte with it, the grammar is fed the second piece first, and
`llama_grammar_accept` throws; `throw e;` then slices its message to "std::exception".
"""

from __future__ import annotations

import re
from typing import Any

from ...errors import first_line
from ...show import show

# rule -> what it recognises (the report lists each with the rows it named)
RULES: dict[str, str] = {
    "prefill_space": "the chat endpoint: common_sampler_init skipped a first prefill token that holds the space "
    "prefix and the prompt's first byte, so the grammar refused the generation prompt",
    "prefill_refused": "the chat endpoint: the grammar refused the generation prompt's tokens",
    "grammar_not_parsed": "the server could not parse the request's grammar",
    "schema_not_compiled": "llguidance could not compile the request's JSON schema",
    "no_answer": "no HTTP answer: the server exited or did not answer in time",
    "unclassified": "cause not classified: the server's own message and error lines are given",
}

SAMPLER_INIT = "Failed to initialize samplers"
SLICED = "std::exception"  # what a `throw e;` of a std::exception & says
# LOG_ERR's "Generation prompt:\n'%s'\n": the prompt may hold newlines, so it ends at the quote
# before the next log line (a timestamped one, or the end)
_GEN_PROMPT = re.compile(r"Generation prompt:\n'(.*?)'\n(?=\d+\.\d+\.\d+\.\d+ [A-Z] |\Z)", re.S)
_ACCEPT = re.compile(r"Unexpected empty grammar stack after accepting piece: (.*?)(?: \((\d+)\))?$")
_ERROR_LINE = re.compile(r"^\S+ E (.*)$", re.M)


def error_lines(log: str, limit: int = 3) -> list[str]:
    """The server's own error lines (`E`), the first `limit`."""
    return [m[1].strip() for m in _ERROR_LINE.finditer(log)][:limit]


def generation_prompt(log: str) -> str | None:
    m = _GEN_PROMPT.search(log)
    return m[1] if m else None


def _prefill(vocab: Any, prompt: str) -> str | None:
    """The sentence for a generation prompt whose first token swallowed its first byte into the
    skipped space piece; None where the first token is not such a piece."""
    toks = vocab.tokenize(prompt.encode(), add_special=False, parse_special=True)
    if len(toks) < 2:
        return None
    first = vocab.token_to_piece(toks[0], special=True)
    if not first[:1].isspace() or prompt[:1].isspace() or len(first.strip()) == 0:
        return None  # a lone space piece is what the skip is for: nothing of the prompt is lost
    second = vocab.token_to_piece(toks[1], special=True)
    return (
        f"common_sampler_init skipped the first prefill token {toks[0]} {show(first)} (the space prefix merged with "
        f"the prompt's first byte {show(first.lstrip())}), so the grammar, whose root begins with the generation "
        f"prompt {show(prompt.encode())}, was fed {toks[1]} {show(second)} first and refused it"
    )


# what llama-server's JSON parser (nlohmann::json) says when it cannot read the request itself
REQUEST_PARSE_ERROR = "json.exception.parse_error"


def request_fault(status: int, message: str) -> str:
    """Why a reply is no answer of the build to the request but a fault (an HTTP 5xx: the server
    failed, or it could not parse our own request's JSON), or "" when it is an answer (a 200, or a
    4xx refusal such as the prefill's, which is the build's finding). Such a reply measured nothing:
    counted as an error row it read as a build that broke no grammar (issue 58, 11)."""
    if REQUEST_PARSE_ERROR in message:
        return f"the server could not parse the request itself (HTTP {status}: {first_line(message)[:200]!r})"
    if status >= 500:
        return f"the server failed on the request (HTTP {status}: {first_line(message)[:200]!r})"
    return ""


def cause_of(status: int, message: str, log: str, vocab: Any) -> tuple[str, str]:
    """(rule, cause) of one server error; ("", "") for a reply that is no error. `status` is the
    HTTP status (0: no answer), `message` the body's error message (or the client's), `log` the
    server's lines while it answered, `vocab` what the server loaded (`Vocab`)."""
    if status == 0:
        return "no_answer", f"no answer: {message}"
    if status == 200 and not message:
        return "", ""
    said = message.removeprefix(f"{SAMPLER_INIT}: ")
    prompt = generation_prompt(log)
    if SAMPLER_INIT in message and prompt is not None:
        m = _ACCEPT.search(said)
        how = (
            f"llama_grammar: {said!r}"
            if m
            else "llama_grammar_accept's message is lost to `throw e;` (it says std::exception)"
            if said == SLICED
            else repr(said)
        )
        why = _prefill(vocab, prompt)
        if why:
            return "prefill_space", f"{why}; {how} (HTTP {status})"
        return "prefill_refused", (
            f"the grammar refused the tokens of the generation prompt {show(prompt.encode())}; {how} (HTTP {status})"
        )
    if "failed to parse grammar" in message:
        return "grammar_not_parsed", f"the server could not parse the grammar: {message!r} (HTTP {status})"
    if "failed to compile JSON schema" in message or "failed to compile JSON schema" in log:
        return "schema_not_compiled", f"llguidance could not compile the JSON schema: {message!r} (HTTP {status})"
    lines = [ln for ln in error_lines(log) if ln not in message]
    return "unclassified", (
        f"cause not classified: HTTP {status}: {message!r}" + (f"; log: {' | '.join(lines)}" if lines else "")
    )


__all__ = ["RULES", "cause_of", "error_lines", "generation_prompt", "request_fault"]
