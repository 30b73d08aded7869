"""The end-to-end matrix through the product: llama-server, shipped and patched, asked as a client asks.

`generate` runs the matrix through the Python port inside llama-cpp-python's decode loop. This
module asks the real `llama-server` (`server`: four builds, two samplers by two llguidance
versions) the same cases, on the same models with the same prompts, and judges every output with
`generate`'s own independent checks (exact string, `json` + `jsonschema`, `re`):

- the grammar cases go as `"grammar": "%llguidance {}\\n..."` to `/completion`;
- the JSON case goes as `"json_schema"` (the server's `json_schema_to_grammar` makes the grammar);
- a control case, `json_enum_gbnf`, sends the same schema as a plain GBNF `grammar` (converted
  by llama.cpp's own `json_schema_to_grammar` with `force_gbnf`): the guide's 3.1 claim that the GBNF
  path is untouched by either bug;
- every model also gets the JSON case through `/v1/chat/completions` with `response_format`
  `json_schema` (`json_enum_chat`), through its own chat template as the server renders it
  (ChatML, the server's default, for a GGUF without one). On this vendored llama.cpp that path
  does not reach llguidance: the chat code (`common/chat-auto-parser-generator.cpp`) turns the
  schema into GBNF with `build_grammar`, so this row is a second control on every vocab.

Temperature 0 and a fixed seed. For each request: the HTTP status, whether the body has an error
field, the text, the `llg error` lines the server logged while it ran (requests are sent one at a
time, so the log between two requests is that request's), tokens per second from the response's
own `timings`, and the outcome. `load_test()` sends 32 constrained requests over 4 slots at once.

`differential()` compares a server result with the port's matrix on the same model: outcome, and
tokens up to the first violation.

But:
- the output is judged from the tokens the server returns (`return_tokens`), as real bytes
  (`Vocab.token_to_piece`), the way `generate` judges the port's. The server's own `content` is
  the cross-check: every answer's judged bytes are compared with it (`content_match`, under the
  rules of `CONTENT_RULES`), and where the two disagree the row says so (`judge disagrees`) and
  is counted neither as a pass nor as a violation: a finding about the server must be the
  server's own words, not only this suite's decoding of them;
- the recorded text keeps a short tail after the first violation (`generate.recorded_output`).
"""

from __future__ import annotations

import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from . import generate as G
from . import llama_server as S
from . import nb
from . import params as P
from .errors import InputError, first_line
from .grammars import json_grammar, literal_grammar
from .native import special_literal, special_text
from .overrides import Override, check_log, model_label, server_args
from .paths import RESULTS, ROOT, resolve
from .results import file_sha256
from .server_causes import cause_of
from .vocab import Vocab

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
LLG_ERROR = re.compile(r"llg error: (.*)")
GREEDY_LINE = "tokenizer is not byte exact"
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


def gbnf_of(schema: dict[str, Any]) -> str:
    """The schema as GBNF, by llama.cpp's own `json_schema_to_grammar(schema, force_gbnf=true)`
    (`server.GBNF_TOOL`). llama-cpp-python's Python port of it drops `minimum`/`maximum`, so its
    grammar admits counts the schema forbids."""
    return _gbnf(json.dumps(schema, sort_keys=True))


@lru_cache(maxsize=8)  # one converter run per schema: request_for is asked for every build and for the payload
def _gbnf(schema_json: str) -> str:
    import subprocess

    r = subprocess.run([str(S.GBNF_TOOL)], input=schema_json.encode(), capture_output=True, timeout=60)
    if r.returncode != 0:
        raise S.ServerError(f"schema-to-gbnf: {first_line(r.stderr.decode('utf-8', 'replace')) or r.returncode}")
    return r.stdout.decode()


def special_case(vocab: Vocab) -> G.Case | None:
    """Beyond the PR (bug C): a literal that spells the end-of-turn token's text inside plain
    text. `tokenize_fn` passes parse_special=true, so where it is kept (upstream; the fixed bridge
    on vocabs its probe calls exact) the forced bytes become the control token itself, and a
    decoder ends the turn there."""
    literal = special_literal(vocab)  # the native harness's bug C job walks the same string
    if not literal:
        return None
    text = special_text(vocab)
    return G.Case(
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


def special_pattern_case(vocab: Vocab) -> G.Case | None:
    schema = special_pattern_schema(vocab)
    if schema is None:
        return None
    want = json.dumps(special_text(vocab) + "x")

    def check(s: str) -> bool:
        try:
            return json.loads(s) == special_text(vocab) + "x"
        except ValueError:
            return False

    return G.Case(
        SPECIAL_PATTERN_CASE,
        json_grammar(schema),
        check,
        f"a json_schema string whose pattern spells the special token {special_text(vocab)!r}",
        want.startswith,
    )


def case_spec(case: str, vocab: Vocab | None = None) -> G.Case:
    """The `generate.Case` of a server case: the matrix's own, the JSON case for the extra JSON
    cases, the vocab's special literal or pattern for the two bug C cases."""
    if case in SPECIAL_CASES:
        spec = (special_case if case == SPECIAL_CASE else special_pattern_case)(vocab) if vocab is not None else None
        if spec is None:
            raise InputError(f"case {case}", "the vocab has no end-of-turn token with printable text")
        return spec
    return judge_case(case)


def judge_case(case: str) -> G.Case:
    """The `generate.Case` whose check judges `case` (the extra cases judge as the JSON case; the
    rejected schema is judged by whether the server said so, in `ask`)."""
    if case == SPECIAL_CASE:
        return G.CASES["forced_literal"]  # its prompt: the special literal is judged by `case_spec`
    if case == SPECIAL_PATTERN_CASE:
        return G.CASES["json_enum"]  # its prompt: the pattern is judged by `case_spec`
    return G.CASES["json_enum" if case in EXTRA_CASES else case]


def violation_grammar(case: str) -> str:
    """The llguidance grammar whose truth mask finds an output's first violation. The GBNF and
    chat cases are judged against the plain schema (llguidance's flexible whitespace), since the
    server's GBNF allows whitespace the JSON case's compact option would not."""
    return json_grammar(G.JSON_SCHEMA) if case in EXTRA_CASES else G.CASES[case].grammar


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
        c = G.CASES["json_enum"]
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
                    "json_schema": {"name": "answer", "schema": {**G.JSON_SCHEMA, **G.JSON_OPTIONS}},
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
        return "/completion", "json_schema", {**body, "json_schema": {**G.JSON_SCHEMA, **G.JSON_OPTIONS}}
    if case == SPECIAL_PATTERN_CASE:
        schema = special_pattern_schema(vocab) if vocab is not None else None
        return "/completion", "json_schema", {**body, "json_schema": schema or {}}
    if case == GBNF_CASE:
        return "/completion", "grammar (GBNF)", {**body, "grammar": gbnf_of(G.JSON_SCHEMA)}
    if case == "":
        return "/completion", "none", body
    grammar = (
        case_spec(case, vocab).grammar
        if case == SPECIAL_CASE and vocab is not None
        else (G.CASES[case].grammar if case in G.CASES else "")
    )
    return "/completion", "grammar (%llguidance)", {**body, "grammar": "%llguidance {}\n" + grammar}


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
    cause: str = ""  # a server error's cause (`server_causes`), "" for an answer that is none
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


def _strip_eog(vocab: Vocab, tokens: list[int]) -> tuple[list[int], bool]:
    eog = set(vocab.eog_tokens)
    for i, t in enumerate(tokens):
        if t in eog:
            return tokens[:i], True
    return tokens, False


def _content(body: dict[str, Any], endpoint: str) -> tuple[str, list[int] | None, str, float]:
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
    shown: str  # the text recorded (`generate.recorded_output`)
    first_violation: int | None  # the first token the grammar does not allow there (truth bridge)
    output: bytes  # the real bytes of the tokens up to the end-of-generation token


def judge_tokens(vocab: Vocab, case: str, tokens: list[int], stop: str) -> Judged:
    """Judge one `/completion` answer from its tokens: decoded as real pieces, checked by the
    case's own check, its first violation found by the truth bridge. Shares nothing mutable between
    calls (the load test calls it from several threads on one `Vocab`)."""
    c = case_spec(case, vocab)
    kept, eog = _strip_eog(vocab, tokens)
    g = G.Generation(
        tokens=kept,
        output=vocab.real_bytes(kept),
        stop="eog" if eog or stop == "eos" else "limit" if stop == "limit" else stop,
    )
    judged_by = c.grammar if case in SPECIAL_CASES else violation_grammar(case)
    shown = G.recorded_output(vocab, G.Case(case, judged_by, c.check, c.description), g)
    return Judged(G.judge(c, g), shown, G.first_violation(vocab, judged_by, kept), g.output)


def ask(
    srv: S.Server,
    vocab: Vocab,
    model: str,
    synthetic: bool,
    llg: str,
    sampler: str,
    case: str,
    prompt: G.Prompt,
    max_tokens: int,
    seed: int,
    temperature: float,
    timeout: float = S.REQUEST_TIMEOUT,
) -> ServerRow:
    """One case, one request, judged, with the `llg error` lines the server logged meanwhile
    (requests are sent one at a time, so the log between two is that request's)."""
    endpoint, sent_as, body = request_for(case, prompt, max_tokens, seed, temperature, vocab)
    start = srv.log_size()
    reply = S.post(srv, endpoint, body, timeout)
    log = srv.settled_log(start)
    # the warning comes once per vocab, so it is remembered rather than the whole log read again
    srv.said_greedy = srv.said_greedy or GREEDY_LINE in log
    got = answered(
        srv,
        vocab,
        model,
        synthetic,
        llg,
        sampler,
        case,
        endpoint,
        sent_as,
        reply,
        LLG_ERROR.findall(log),
        srv.said_greedy,
    )
    if got.http_status != 200 or got.error_field or got.outcome == "no answer":
        got.cause = cause_of(got.http_status, reply.error or reply.text[:300], log, vocab)[1]
    return got


def answered(
    srv: S.Server,
    vocab: Vocab,
    model: str,
    synthetic: bool,
    llg: str,
    sampler: str,
    case: str,
    endpoint: str,
    sent_as: str,
    reply: S.Reply,
    llg_errs: list[str],
    greedy: bool,
) -> ServerRow:
    """The row of one reply. Reads the server's state (is it alive, its last log lines) and changes
    nothing: the load test calls it from several threads."""

    def row(
        outcome: str, text: str = "", tokens: list[int] | None = None, stop: str = "", error: str = "", tps: float = 0.0
    ) -> ServerRow:
        return ServerRow(
            model,
            vocab.name,
            synthetic,
            llg,
            sampler,
            case,
            endpoint,
            sent_as,
            reply.status,
            reply.error != "",
            outcome,
            len(llg_errs),
            greedy,
            len(tokens or []),
            text,
            stop_type=stop,
            error=first_line(error or (llg_errs[0] if llg_errs else "")),
            tokens=tokens or [],
            tok_s=tps,
        )

    if reply.status == 0:
        alive = "" if srv.alive() else f"; the server exited ({srv.last_lines()})"
        return row("no answer", error=reply.text + alive)
    if case == REJECTED_CASE:
        loud = reply.status != 200 or bool(reply.error) or reply.body is None
        text = "" if loud or reply.body is None else _content(reply.body, endpoint)[0]
        return row(
            "refused" if loud else "ignored",
            show_text_of(text),
            stop=str((reply.body or {}).get("stop_type", "")),
            error=reply.error or (llg_errs[0] if llg_errs else ""),
        )
    if reply.status != 200 or reply.error or reply.body is None:
        return row("error", error=reply.error or reply.text[:300])
    return judged_row(row, vocab, case, endpoint, reply.body)


def judged_row(row: Any, vocab: Vocab, case: str, endpoint: str, body: dict[str, Any]) -> ServerRow:
    """An answered request's row: judged from its tokens (`judge_tokens`), its bytes compared with
    the server's `content`; `row(outcome, text, tokens, stop, tps=...)` makes the row."""
    text, got, stop, tps = _content(body, endpoint)
    tokens = got or []
    match = content_match(vocab, got, text, chat=endpoint != "/completion")
    if case == "":  # the unconstrained baseline: only its speed is wanted
        r = row("unconstrained", text, tokens, stop, tps=tps)
    elif endpoint == "/completion":
        j = judge_tokens(vocab, case, tokens, stop)
        r = row(j.outcome, j.shown, _strip_eog(vocab, tokens)[0], stop, tps=tps)
        r.first_violation = j.first_violation
    else:  # the chat endpoint: its message text is judged (its tokens, where given, are only the cross-check)
        g = G.Generation(output=text.encode(), stop="limit" if stop == "length" else "eog")
        r = row(G.judge(case_spec(case, vocab), g), text, _strip_eog(vocab, tokens)[0], stop, tps=tps)
    r.content_match = match
    if match.startswith("differs"):
        r.outcome = DISAGREES
    return r


@dataclass
class LoadResult:
    model: str
    llguidance: str
    sampler: str
    requests: int
    parallel: int
    passed: int
    violations: int  # the judge's, each confirmed by the server's own content (content_match "same...")
    other: int  # truncated, errors, no answer
    differ_from_sequential: int  # requests whose outcome is not the same case's sequential outcome
    healthy_after: bool
    llg_errors: int
    seconds: float
    round: int = 1  # which repetition of the load test on this build
    judge_disagrees: int = 0  # answers whose tokens and content disagree: a bug of this suite's until shown otherwise
    violating: str = ""  # each violation: case, stop type and the text's start, for a reader to check

    def row(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "seconds"}


def label(model: Path, vocab: Vocab) -> str:
    """The `model` of a row: the file, and the overrides the vocab (and so the server) loads with."""
    return model_label(model.name, vocab.overrides)


def server_extra(overrides: tuple[Override, ...]) -> tuple[str, ...]:
    """llama-server's arguments for llama.cpp's key overrides: `--override-kv` each, and the log at
    trace level (`-lv 4`), the level at which the server writes its loader's "Using metadata
    override" line, so its own log shows each one taken (`taken`)."""
    return (*server_args(overrides), "-lv", "4") if overrides else ()


def taken(srv: S.Server, overrides: tuple[Override, ...]) -> None:
    """ServerError unless the server's log shows llama.cpp taking every override."""
    if overrides:
        try:
            check_log(overrides, srv.log(), f"{srv.binary.name} on {srv.model.name}")
        except InputError as e:
            raise S.ServerError(str(e)) from None


def load_test(
    exe: Path,
    model: Path,
    vocab: Vocab,
    synthetic: bool,
    llg: str,
    sampler: str,
    cases: list[str],
    prompts: dict[str, G.Prompt],
    sequential: dict[str, str],
    log_path: Path,
    requests: int = 32,
    parallel: int = 4,
    max_tokens: int = 64,
    seed: int = 0,
    n_gpu_layers: int = 0,
) -> tuple[LoadResult, list[ServerRow]]:
    """`requests` constrained requests (the cases in turn) over `parallel` slots at once, every
    output judged; `sequential` holds each case's outcome from the one-at-a-time run, so a slot
    whose matcher died touching another shows as an outcome that changed. Returns the summary and
    each request's row (its `content_match` the server's own word on its bytes).

    The threads share the server handle and the vocab, and change neither: each posts, then
    judges its own reply (`answered`); the log is read once, after every answer is in."""
    t0 = time.perf_counter()
    order = [cases[i % len(cases)] for i in range(requests)]

    def one(srv: S.Server, case: str) -> ServerRow:
        endpoint, sent_as, body = request_for(case, prompts[case], max_tokens, seed, 0.0, vocab)
        return answered(
            srv,
            vocab,
            label(model, vocab),
            synthetic,
            llg,
            sampler,
            case,
            endpoint,
            sent_as,
            S.post(srv, endpoint, body),
            [],
            False,
        )

    # one thread: ggml's threads spin while they wait, and on 2 shared cores two of them beside the
    # client's judging threads made each request 60 times slower than one at a time
    with S.serve(
        exe,
        model,
        log_path,
        parallel=parallel,
        threads=1,
        n_gpu_layers=n_gpu_layers,
        extra=server_extra(vocab.overrides),
    ) as srv:
        taken(srv, vocab.overrides)
        with ThreadPoolExecutor(max_workers=parallel) as pool:
            rows = list(pool.map(lambda c: one(srv, c), order))
        healthy = srv.alive() and S.answers_health(srv, 5.0)
        llg_total = len(LLG_ERROR.findall(srv.log()))
    outcomes = [r.outcome for r in rows]
    counted = ("pass", "violation", DISAGREES)
    result = LoadResult(
        label(model, vocab),
        llg,
        sampler,
        requests,
        parallel,
        outcomes.count("pass"),
        outcomes.count("violation"),
        sum(1 for o in outcomes if o not in counted),
        sum(1 for r in rows if r.outcome != sequential.get(r.case)),
        healthy,
        llg_total,
        round(time.perf_counter() - t0, 3),
        judge_disagrees=outcomes.count(DISAGREES),
        violating="; ".join(
            # the text's start only: the suite's annotation after it ("…[56 more tokens after …]") is never cut
            sorted(
                {
                    f"{r.case} ({r.stop_type}): {r.output.split('…[')[0][:40]!r}"
                    for r in rows
                    if r.outcome == "violation"
                }
            )[:3]
        ),
    )
    return result, rows


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
        if (
            r["llguidance"] != served.get("port_llguidance")
            or r["endpoint"] != "/completion"
            or r["case"] in EXTRA_CASES
        ):
            continue
        hit = port.get((r["model"], r["case"], r["sampler"]))
        if hit is None:
            continue
        pr, ptoks = hit
        if not r.get("synthetic", True):
            out.append(
                DiffCell(
                    r["model"],
                    r["case"],
                    r["sampler"],
                    pr["outcome"],
                    r["outcome"],
                    REAL_COMPARED,
                    None,
                    None,
                    pr["outcome"] == r["outcome"],
                )
            )
            continue
        fv = r.get("first_violation")
        n = len(toks) if fv is None else min(len(toks), fv + 1)
        diff = next((i for i in range(min(n, len(ptoks))) if ptoks[i] != toks[i]), None)
        if diff is None and (len(ptoks) < n or (fv is None and len(ptoks) != len(toks))):
            diff = min(len(ptoks), n)  # one stopped where the other went on
        out.append(
            DiffCell(
                r["model"],
                r["case"],
                r["sampler"],
                pr["outcome"],
                r["outcome"],
                SYNTHETIC_COMPARED,
                n,
                diff,
                pr["outcome"] == r["outcome"] and diff is None,
            )
        )
    return sorted(out, key=lambda d: (d.model, d.case, d.sampler))


def payload(model: Path, run: ModelRun, settings: dict[str, Any]) -> dict[str, Any]:
    """The server notebook's result (`results.SCHEMAS["server"]`): the settings, each case's prompt
    and how it was sent, a row per (llguidance, sampler, case), the tokens, the load test, the
    builds' sha256 (so a rebuilt server makes the result stale), and the timings kept apart."""
    cases = sorted({r.case for r in run.rows}, key=[*G.CASES, *EXTRA_CASES].index)
    return {
        "model": model.name,
        "llguidance": run.llguidance,
        "port_llguidance": run.port_llguidance,
        **settings,
        "n_gpu_layers": run.n_gpu_layers,
        "cases": {
            c: {
                "prompt": run.prompts[c].text,
                "prompt_kind": run.prompts[c].kind,
                "sent_as": request_for(c, run.prompts[c], 1, 0, 0.0)[1],
                **({"grammar": run.special_grammar} if c == SPECIAL_CASE else {}),
                **({"json_schema": run.special_schema} if c == SPECIAL_PATTERN_CASE else {}),
            }
            for c in cases
        },
        "builds": {b.name: file_sha256(b) for b in S.builds() if b.exists()},
        "rows": [r.row() for r in run.rows],
        "tokens": [r.tokens for r in run.rows],
        "outputs": [r.output for r in run.rows],
        "load": [x.row() for x in run.loads],
        "load_violations": run.load_violations,
        "timing": {
            "constrained_tok_s": [
                {"llguidance": r.llguidance, "sampler": r.sampler, "case": r.case, "tok_s": r.tok_s} for r in run.rows
            ],
            "unconstrained_tok_s": run.baseline,
            "load_seconds": [
                {"llguidance": x.llguidance, "sampler": x.sampler, "seconds": x.seconds} for x in run.loads
            ],
        },
    }


def _failed_rows(
    vocab: Vocab,
    model: str,
    synthetic: bool,
    llg: str,
    sampler: str,
    cases: list[str],
    prompts: dict[str, G.Prompt],
    outcome: str,
    why: str,
) -> list[ServerRow]:
    return [
        ServerRow(
            model,
            vocab.name,
            synthetic,
            llg,
            sampler,
            c,
            *request_for(c, prompts.get(c, G.PLAIN), 1, 0, 0.0)[:2],
            0,
            False,
            outcome,
            0,
            False,
            0,
            "",
            error=first_line(why),
        )
        for c in cases
    ]


class ServerFault(InputError):
    """A server that died or stopped answering during its cases, and again when they were asked
    of a fresh one: a fault of the run, never the build's answer (issue 48, break 3)."""


def _shown_log(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def run_build(
    exe: Path,
    model: Path,
    vocab: Vocab,
    synthetic: bool,
    llg: str,
    sampler: str,
    cases: list[str],
    prompts: dict[str, G.Prompt],
    log_path: Path,
    max_tokens: int,
    seed: int,
    temperature: float,
    n_gpu_layers: int = 0,
    timeout: float = S.REQUEST_TIMEOUT,
    unconstrained: bool = True,
) -> tuple[list[ServerRow], float]:
    """Every case through one server build, one request at a time; (rows, unconstrained tokens/s,
    0.0 unless `unconstrained` asks for that request, after the cases).
    The vocab's key overrides (`Vocab.overrides`) go to the server as `--override-kv`.

    A without-fix or with-fix server (`S.SAMPLERS`) that never starts (`S.NotStarted`: a chat
    template it cannot render exits it while loading) raises ServerFault naming the build, the
    model and its log's last lines: error rows would let the page say no request broke its grammar
    (issue 48, break 4). A candidate's server that never starts, or any server whose log does not
    show an override taken or cannot be written, fails every case with its reason. One that dies
    or stops answering during the cases is a fault of the run, not an answer: every case is asked
    again of a fresh server (its log beside the first, `NAME-retry.log`), so each build answers
    from the same state; lost again, ServerFault names the build, the model, the case and the
    log's last lines."""
    asks = [*cases, *([""] if unconstrained and cases else [])]  # "": the unconstrained request, last

    def attempt(log: Path, rows: list[ServerRow]) -> tuple[float, str]:
        """One fresh server asked every case: (unconstrained tokens/s, why it was lost or "")."""
        with S.serve(exe, model, log, n_gpu_layers=n_gpu_layers, extra=server_extra(vocab.overrides)) as srv:
            taken(srv, vocab.overrides)
            for c in asks:
                prompt = prompts[c] if c else prompts.get(cases[0], G.PLAIN)
                args = (c, prompt, max_tokens, seed, temperature, timeout)
                r = ask(srv, vocab, label(model, vocab), synthetic, llg, sampler, *args)
                if r.outcome == "no answer":
                    said = f"case {c!r}" if c else "the unconstrained request"
                    why = r.error.removeprefix("no answer: ")  # says the log's last lines where it exited
                    ends = "" if "the server exited" in why else f" ends: {srv.last_lines()}"
                    return 0.0, f"no answer at {said} ({why}); its log {_shown_log(log)}{ends}"
                if not c:
                    return r.tok_s, ""
                rows.append(r)
        return 0.0, ""

    lost = ""
    for log in (log_path, log_path.with_name(f"{log_path.stem}-retry{log_path.suffix}")):
        rows: list[ServerRow] = []
        try:
            base, why = attempt(log, rows)
        except S.ServerError as e:
            if lost:  # the fresh server did not even start: the fault stands
                raise ServerFault(f"server {exe.name} on {model.name}", f"{lost}; a fresh one then: {e}") from None
            if isinstance(e, S.NotStarted) and sampler in S.SAMPLERS:
                # no request reached it: error rows would read as a build that broke no grammar
                raise ServerFault(
                    f"server {exe.name} on {model.name}", f"never started, nothing measured: {first_line(str(e))}"
                ) from None
            failed = _failed_rows(
                vocab, label(model, vocab), synthetic, llg, sampler, cases[len(rows) :], prompts, "error", str(e)
            )
            return rows + failed, 0.0
        if not why:
            return rows, base
        if lost:
            raise ServerFault(f"server {exe.name} on {model.name}", f"{why}, and again from a fresh server")
        lost = why
    raise AssertionError("unreachable: the second loss raised")


def prompts_for(llm: Any, cases: list[str], style: str) -> dict[str, G.Prompt]:
    """The port's matrix prompts (`generate.prompt_for`), the extra cases taking the JSON case's."""
    return {c: G.prompt_for(llm, judge_case(c), style) for c in cases}


LOG_DIR = S.SERVER / "logs"  # each server's log, per input and build (generated, not a result)


def log_dir_for(results_dir: str) -> Path:
    """Where a run writing its result to `results_dir` keeps its servers' logs: `LOG_DIR` for the
    main results; beside any other results (a what-if's), so that a what-if named like a main input
    never truncates the main run's logs."""
    where = resolve(results_dir)
    return LOG_DIR if where.resolve() == RESULTS.resolve() else where.parent / "logs" / "server"


@dataclass
class ModelRun:
    """One model through every server build."""

    rows: list[ServerRow]
    loads: list[LoadResult]
    baseline: dict[str, float]  # "SAMPLER-LLG" -> unconstrained tokens/s, asked of the first build that answered
    prompts: dict[str, G.Prompt]
    llguidance: list[str]
    port_llguidance: str
    n_gpu_layers: int = 0  # as the servers ran (the parameter, or make's N_GPU_LAYERS)
    special_grammar: str = ""  # the special literal's grammar on this vocab
    special_schema: dict[str, Any] = field(default_factory=dict)  # the special pattern's schema on this vocab
    # each load-test violation the server's own content confirms, with the request that shows it
    load_violations: list[dict[str, Any]] = field(default_factory=list)


class JudgeDisagrees(InputError):
    """The judge's bytes for a reply's tokens are not the server's `content`: a bug of this suite's
    until shown otherwise, so the run publishes nothing."""


def curl_for(endpoint: str, body: dict[str, Any], base: str = "http://127.0.0.1:8080") -> str:
    """A request as a maintainer pastes it into a shell."""
    import shlex

    return (
        f"curl -s {base}{endpoint} -H 'Content-Type: application/json' -d "
        f"{shlex.quote(json.dumps(body, ensure_ascii=False))}"
    )


def run(
    name: str,
    model: Path,
    synthetic: bool,
    instruct: bool | None,
    cases: list[str],
    prompt: str = "auto",
    samplers: tuple[str, ...] = S.SAMPLERS,
    temperature: float = 0.0,
    seed: int = 0,
    max_tokens: int = 64,
    load_requests: int = 0,
    parallel: int = 4,
    n_gpu_layers: int = 0,
    say: Any = print,
    candidates: tuple[str, ...] = S.CANDIDATES,
    overrides: list[str] | tuple[str, ...] = (),
    log_dir: Path | None = None,
    load_rounds: int = 1,
) -> ModelRun:
    """Every case on every built server (`server.built`), one request at a time, then, when
    `load_requests`, the load test (synthetic models only: a real model on 2 cores would take
    minutes per build). The load test is `make bench`'s (`bench.server_load`), not the report's: how
    a server batches concurrent requests changes from run to run, and so, on some runs, does the
    outcome. The candidate patches' servers (`candidates`) answer the same cases on llguidance as
    llama.cpp pins it, with no load test. `load_rounds` repeats the load test on each build (a
    fresh server each time): an outcome that comes and goes shows as a spread. Each server's log goes
    to `log_dir`/NAME (default `LOG_DIR`). llama.cpp's key `overrides` (KEY=TYPE:VALUE) go to every
    load: the vocab, the prompts' model and each server (`--override-kv`). Raises InputError with
    the build's reason when no server is built, and JudgeDisagrees, naming the request, when the
    judge's bytes and a server's own `content` disagree on any answer: a finding about the server is
    the server's own words."""
    status, why = S.built()
    if why:
        raise InputError(f"server for {name}", why)
    n_gpu_layers = P.gpu_layers(n_gpu_layers)
    unknown = [c for c in cases if c not in G.CASES and c not in EXTRA_CASES]
    if unknown:
        raise InputError("parameter cases", f"unknown case(s) {unknown}; choose from {[*G.CASES, *EXTRA_CASES]}")
    G.check_generative(model)
    # a real model is the input itself: the vocab this kernel's analyses of it loaded, and the truth
    # bridge they built (`nb.cached_vocab`); a synthetic model is a file of its own
    vocab = nb.cached_vocab(model, name, list(overrides)) if not synthetic else Vocab(model, name, overrides)
    vocab.require_text()
    if special_case(vocab) is None and any(c in SPECIAL_CASES for c in cases):
        say(
            f"{name}: no end-of-turn token with printable text: {', '.join(c for c in cases if c in SPECIAL_CASES)} "
            f"left out"
        )
        cases = [c for c in cases if c not in SPECIAL_CASES]
    llm = G.load_model(
        model, n_ctx=64, overrides=vocab.overrides
    )  # only for the prompts: the chat template and the tokens of its text
    style = G.prompt_style(llm, prompt, synthetic, instruct)
    prompts = prompts_for(llm, cases, style)
    del llm
    versions = list(status["llguidance"])
    rows: list[ServerRow] = []
    loads: list[LoadResult] = []
    disputed: list[ServerRow] = []
    confirmed: list[dict[str, Any]] = []
    baseline: dict[str, float] = {}
    pin = S.LLG_PINNED if S.LLG_PINNED in versions else versions[0]
    # the unconstrained request runs no line of the grammar sampler, so it is asked of the first
    # build only: the same 64 tokens on every build cost gemma3-270m 1.3 s a build
    for llg in versions:
        for s in (*samplers, *(candidates if llg == pin else ())):
            exe = S.binary(s, llg)
            if s in candidates and not exe.exists():
                say(f"{exe.name}: not built, left out")
                continue
            logs = (log_dir or LOG_DIR) / name
            got, base = run_build(
                exe,
                model,
                vocab,
                synthetic,
                llg,
                s,
                cases,
                prompts,
                logs / f"{exe.name}.log",
                max_tokens,
                seed,
                temperature,
                n_gpu_layers,
                unconstrained=not baseline,  # none answered yet
            )
            rows += got
            if base:
                baseline[f"{s}-{llg}"] = base
            passed = sum(r.outcome == "pass" for r in got)
            say(
                f"{exe.name}: {passed}/{len(got)} pass, {sum(r.llg_errors for r in got)} llg errors, "
                f"{sum(r.error_field for r in got)} error fields"
            )
            if synthetic and load_requests and s not in candidates:
                loaded = [c for c in cases if c not in (CHAT_CASE, REJECTED_CASE, *SPECIAL_CASES)]
                for k in range(1, load_rounds + 1):
                    try:
                        x, answers = load_test(
                            exe,
                            model,
                            vocab,
                            synthetic,
                            llg,
                            s,
                            loaded,
                            prompts,
                            {r.case: r.outcome for r in got},
                            logs / f"{exe.name}-load.log",
                            load_requests,
                            parallel,
                            max_tokens,
                            seed,
                            n_gpu_layers,
                        )
                    except Exception as e:  # noqa: BLE001 - the load test's failure costs its own row, never the rows above
                        say(f"  load round {k}: {first_line(str(e)) or type(e).__name__}")
                        continue
                    x.round = k
                    loads.append(x)
                    disputed += [r for r in answers if r.outcome == DISAGREES]
                    confirmed += [
                        {
                            "round": k,
                            "case": r.case,
                            "output": r.output,
                            "content_match": r.content_match,
                            "curl": curl_for(*request_for(r.case, prompts[r.case], max_tokens, seed, 0.0, vocab)[::2]),
                            "server": " ".join(
                                [
                                    exe.name,
                                    "-m",
                                    model.name,
                                    "--parallel",
                                    str(parallel),
                                    "-t",
                                    "1",
                                    *server_extra(vocab.overrides),
                                ]
                            ),
                        }
                        for r in answers
                        if r.outcome == "violation" and r.content_match.startswith("same")
                    ]
                    say(
                        f"  load round {k}: {x.requests} requests over {x.parallel} slots: {x.violations} violations, "
                        f"{x.judge_disagrees} judge disagreements, {x.differ_from_sequential} differ from one at a "
                        f"time, healthy after: {x.healthy_after}"
                    )
    disputed = [r for r in rows if r.outcome == DISAGREES] + disputed
    if disputed:
        r = disputed[0]
        raise JudgeDisagrees(
            f"server on {name}",
            f"the judge and the server disagree on {r.sampler}-{r.llguidance} {r.case} ({r.content_match}); "
            f"{len(disputed)} answer(s) so, nothing of this run is published",
        )
    spec = special_case(vocab) if SPECIAL_CASE in cases else None
    return ModelRun(
        rows,
        loads,
        baseline,
        prompts,
        versions,
        S.venv_llguidance(),
        n_gpu_layers,
        spec.grammar if spec else "",
        (special_pattern_schema(vocab) or {}) if SPECIAL_PATTERN_CASE in cases else {},
        confirmed,
    )
