"""Judging an answer of llama-server by its bytes, with the server's own `content` beside.

Every answer is judged with `generate`'s own independent checks (exact string, `json` +
`jsonschema`, `re`), the case's (`cases.case_spec`, carried by its `cases.Ask`). But:
- the output is judged from the tokens the server returns (`return_tokens`), as real bytes
  (`Vocab.token_to_piece`), the way `generate` judges the port's. The server's own `content` is
  the cross-check: every answer's judged bytes are compared with it (`content_match`, under the
  rules of `CONTENT_RULES`), and where the two disagree the row says so (`judge disagrees`) and
  is counted neither as a pass nor as a violation: a finding about the server must be the
  server's own words, not only this suite's decoding of them;
- the recorded text keeps a short tail after the first violation (`judge.recorded_output`).

`differential()` compares a server result with the port's matrix on the same model: outcome, and
tokens up to the first violation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ... import generation as G
from ... import judge as J
from ...vocab import Vocab
from .cases import EXTRA_CASES, Ask

DISAGREES = "judge disagrees"  # the outcome of an answer whose tokens and content do not agree

# What llama-server does between the tokens it returns and the `content` it returns, read in the
# vendored tools/server (server-context.cpp `process_token`, `send_final_response`; common/json.cpp
# `dump_safe`). The judge's bytes are the tokens' real pieces; the content must be those bytes after
# these rules, or the judge and the server disagree.
CONTENT_RULES: dict[str, str] = {
    "pieces": "the content is every returned token's piece joined, as common_token_to_piece(ctx, token, special=false) "
    "spells it: llama_token_to_piece with lstrip 0, the judge's own call",
    "control": "a control or unknown token (the end-of-generation token that stopped the answer among them) adds no "
    "bytes: the server renders pieces with special=false",
    "utf8": "bytes that are not valid UTF-8 reach the client as U+FFFD, one per maximal invalid sequence "
    "(nlohmann::json's error_handler_t::replace in dump_safe), as Python's errors='replace' decodes them",
    "chat": "on /v1/chat/completions the message content is what llama.cpp's chat parser keeps of the generated "
    "text (for a json_schema response_format, the JSON: whitespace before it and a ```json fence around it are "
    "dropped), so it is a contiguous part of the tokens' text",
}


@dataclass
class ServerRow:
    model: str
    vocab: str
    synthetic: bool
    llguidance: str
    sampler: str  # the server build: upstream or fixed
    case: str
    endpoint: str
    sent_as: str  # grammar (%llguidance), json_schema, grammar (GBNF), response_format
    http_status: int
    error_field: bool
    outcome: str  # pass, violation, truncated, error (the server said so), no answer
    llg_errors: int
    greedy: bool  # the fixed sampler logged "tokenizer is not byte exact"
    n_tokens: int
    output: str
    stop_type: str = ""
    error: str = ""  # the body's error message, or the first llg error, verbatim first line
    first_violation: int | None = None  # the first token the grammar does not allow (truth bridge), None: none
    # the judge's bytes against the server's own `content` (`content_match`): "same", "same after
    # RULE", "differs ..." (then the outcome is DISAGREES), "no tokens returned"; "" with no answer
    content_match: str = ""
    cause: str = ""  # a server error's cause (`causes`), "" for an answer that is none
    tokens: list[int] = field(default_factory=list)
    tok_s: float = 0.0  # timings.predicted_per_second

    def row(self) -> dict[str, Any]:
        """The tidy, deterministic columns (tokens and timings are kept apart). A real model's text
        and length vary across CPUs of one kind (`generate.MatrixRow.row`): its row keeps the
        outcome, and the text goes to the result's `outputs`."""
        row = {k: v for k, v in self.__dict__.items() if k not in ("tokens", "tok_s")}
        if not self.synthetic:  # where in its text a real model broke the grammar varies with its text
            row.update(output="", n_tokens=0, first_violation=None)
        return row


def show_text_of(text: str, limit: int = 80) -> str:
    """Unconstrained text, cut: what came back where a grammar was ignored is noise past a few words."""
    return text if len(text) <= limit else text[:limit] + "…"


def strip_eog(vocab: Vocab, tokens: list[int]) -> tuple[list[int], bool]:
    """The tokens before the first end-of-generation token, and whether there was one: the token
    that ended an answer is no byte of it (`CONTENT_RULES["control"]`)."""
    eog = set(vocab.eog_tokens)
    for i, t in enumerate(tokens):
        if t in eog:
            return tokens[:i], True
    return tokens, False


def reply_content(body: dict[str, Any], endpoint: str) -> tuple[str, list[int] | None, str, float]:
    """(text, tokens, stop type, tokens/s) from a response body; tokens None where the body has none
    (the chat endpoint gives them only through `logprobs`)."""
    timings = body.get("timings") or {}
    tps = float(timings.get("predicted_per_second") or 0.0)
    if endpoint == "/completion":
        toks = body.get("tokens")
        return (
            str(body.get("content", "")),
            [int(t) for t in toks] if isinstance(toks, list) else None,
            str(body.get("stop_type", "")),
            tps,
        )
    choice = (body.get("choices") or [{}])[0]
    text = str((choice.get("message") or {}).get("content") or "")
    probs = (choice.get("logprobs") or {}).get("content")
    toks = [int(p["id"]) for p in probs if isinstance(p, dict) and "id" in p] if isinstance(probs, list) else None
    return text, toks, str(choice.get("finish_reason", "")), tps


def content_match(vocab: Vocab, tokens: list[int] | None, content: str, chat: bool = False) -> str:
    """The judge's bytes for `tokens` (every returned token's real piece) against the server's own
    `content`: "same" when they are one text, "same after utf8" when they are one text once invalid
    UTF-8 is replaced as the server replaces it, "same after chat" when a chat message is a part of
    the text as the chat parser keeps it (`CONTENT_RULES`), "no tokens returned", or "differs at
    byte N: judge ..., server ..." naming the first difference."""
    if tokens is None:
        return "no tokens returned"
    judged = vocab.real_bytes(tokens)  # rules "pieces" and "control": the judge's own call
    said = content.encode("utf-8", "surrogatepass")
    if judged == said:
        return "same"
    if judged.decode("utf-8", "replace") == content:
        return "same after utf8"
    if chat and content and content in judged.decode("utf-8", "replace"):
        return "same after chat"
    at = next((i for i, (a, b) in enumerate(zip(judged, said)) if a != b), min(len(judged), len(said)))
    return (
        f"differs at byte {at}: judge {show_text_of(judged[at : at + 24].decode('utf-8', 'backslashreplace'), 24)!r}, "
        f"server {show_text_of(said[at : at + 24].decode('utf-8', 'backslashreplace'), 24)!r}"
    )


@dataclass(frozen=True)
class Judged:
    """One answer's tokens as the checks see them."""

    outcome: str  # pass, violation, truncated
    shown: str  # the text recorded (`judge.recorded_output`)
    first_violation: int | None  # the first token the grammar does not allow there (truth bridge)
    output: bytes  # the real bytes of the tokens up to the end-of-generation token


def judge_tokens(vocab: Vocab, ask: Ask, tokens: list[int], stop: str) -> Judged:
    """Judge one `/completion` answer from its tokens: decoded as real pieces, checked by the
    case's own check, its first violation found by the truth bridge (`judge.verdict`). Shares
    nothing mutable between calls (the load test calls it from several threads on one `Vocab`)."""
    return _judged(vocab, ask, *strip_eog(vocab, tokens), stop)


def _judged(vocab: Vocab, ask: Ask, kept: list[int], eog: bool, stop: str) -> Judged:
    """`judge_tokens` of the tokens before the end-of-generation token (`kept`), `eog` whether there was one."""
    if ask.spec is None:
        raise ValueError("the unconstrained request has no check to judge it by")
    g = G.Generation(
        tokens=kept,
        output=vocab.real_bytes(kept),
        stop="eog" if eog or stop == "eos" else "limit" if stop == "limit" else stop,
    )
    v = J.verdict(vocab, ask.spec, g, ask.judged_by)
    return Judged(v.outcome, v.shown, v.first_violation, g.output)


def judged_row(row: Callable[..., ServerRow], vocab: Vocab, ask: Ask, body: dict[str, Any]) -> ServerRow:
    """An answered request's row: judged from its tokens (`judge_tokens`), its bytes compared with
    the server's `content`; `row(outcome, text, tokens, stop, tps=...)` makes the row."""
    text, got, stop, tps = reply_content(body, ask.endpoint)
    kept, eog = strip_eog(vocab, got or [])
    if ask.spec is None:  # the unconstrained baseline: only its speed is wanted
        r = row("unconstrained", text, got or [], stop, tps=tps)
    elif ask.endpoint == "/completion":
        j = _judged(vocab, ask, kept, eog, stop)
        r = row(j.outcome, j.shown, kept, stop, tps=tps)
        r.first_violation = j.first_violation
    else:  # the chat endpoint: its message text is judged (its tokens, where given, are only the cross-check)
        g = G.Generation(output=text.encode(), stop="limit" if stop == "length" else "eog")
        r = row(J.judge(ask.spec, g), text, kept, stop, tps=tps)
    r.content_match = content_match(vocab, got, text, chat=ask.endpoint != "/completion")
    if r.content_match.startswith("differs"):
        r.outcome = DISAGREES
    return r


# -- the port against the server -------------------------------------------------------------
REAL_COMPARED = "outcome"  # what a real model's cell compares (`differential`)
SYNTHETIC_COMPARED = "outcome and tokens"


@dataclass(frozen=True)
class DiffCell:
    model: str
    case: str
    sampler: str
    port_outcome: str
    server_outcome: str
    compared: str  # SYNTHETIC_COMPARED, or REAL_COMPARED for a real model
    compared_tokens: (
        int | None
    )  # up to the first violation of either (or all, when neither broke the grammar); None: not compared
    first_differing_token: int | None  # its index, None when the tokens agree that far (or were not compared)
    same: bool

    def row(self) -> dict[str, Any]:
        """Integers stay integers in a table: "" where a count was not measured (a real model's
        tokens) or there is no differing token."""
        return {k: "" if v is None else v for k, v in self.__dict__.items()}


def differential(matrix: dict[str, Any], served: dict[str, Any]) -> list[DiffCell]:
    """Each (model, case, sampler) the port's matrix (`matrix`, a matrix result) and the server
    (`served`, a server result, on the llguidance the port drives) both ran.

    The tokens are compared up to the server's first violation (its row's `first_violation`,
    found by the truth bridge when it ran), or all of them when it has none: tokens equal that far
    are equally legal on both sides, so no second judge is needed here.

    A real model's cell compares the outcomes only, as the matrix keeps a real model's outcome and
    not its text: its tokens come from quantized kernels built for this CPU (`-march=native`), and at
    temperature 0 a near-tie breaks another way on another machine of the same kind (Gemma 3 270M's
    `no_space` differed from its first token on one), so a committed count of equal tokens would not
    regenerate there. Its tokens stay in the results."""
    port = {
        (r["model"], r["case"], r["bridge"]): (r, t)
        for r, t in zip(matrix["rows"], matrix.get("tokens") or [], strict=False)
    }
    out = []
    for r, toks in zip(served["rows"], served.get("tokens") or [], strict=False):
        hit = port.get((r["model"], r["case"], r["sampler"])) if _ported(r, served) else None
        if hit is not None:
            out.append(_cell(r, toks, *hit))
    return sorted(out, key=lambda d: (d.model, d.case, d.sampler))


def _ported(r: dict[str, Any], served: dict[str, Any]) -> bool:
    """Whether the port's matrix could have run a server row: on the llguidance the port drives,
    through `/completion`, one of the matrix's own cases."""
    return (
        r["llguidance"] == served.get("port_llguidance")
        and r["endpoint"] == "/completion"
        and r["case"] not in EXTRA_CASES
    )


def _cell(r: dict[str, Any], toks: list[int], pr: dict[str, Any], ptoks: list[int]) -> DiffCell:
    """The server's row `r` (its tokens `toks`) against the port's row `pr` (its tokens `ptoks`)."""
    if not r.get("synthetic", True):
        same = pr["outcome"] == r["outcome"]
        return DiffCell(
            r["model"], r["case"], r["sampler"], pr["outcome"], r["outcome"], REAL_COMPARED, None, None, same
        )
    fv = r.get("first_violation")
    n = len(toks) if fv is None else min(len(toks), fv + 1)
    diff = next((i for i in range(min(n, len(ptoks))) if ptoks[i] != toks[i]), None)
    if diff is None and (len(ptoks) < n or (fv is None and len(ptoks) != len(toks))):
        diff = min(len(ptoks), n)  # one stopped where the other went on
    same = pr["outcome"] == r["outcome"] and diff is None
    return DiffCell(r["model"], r["case"], r["sampler"], pr["outcome"], r["outcome"], SYNTHETIC_COMPARED, n, diff, same)
