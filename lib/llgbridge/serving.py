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
own `timings`, and the outcome. `load()` sends 32 constrained requests over 4 slots at once.

`differential()` compares a server result with the port's matrix on the same model: outcome, and
tokens up to the first violation.

But:
- the output is judged from the tokens the server returns (`return_tokens`), as real bytes
  (`Vocab.token_to_piece`), the way `generate` judges the port's: the server's `content` is
  UTF-8 text that can hold back or replace bytes; it is kept beside them;
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
from . import params as P
from . import server as S
from .native import special_literal, special_text
from .errors import InputError, first_line
from .grammars import json_grammar, literal_grammar
from .overrides import Override, check_log, model_label, server_args
from .vocab import Vocab

GBNF_CASE = "json_enum_gbnf"
CHAT_CASE = "json_enum_chat"
REJECTED_CASE = "rejected_schema"
SPECIAL_CASE = "special_literal"
EXTRA_CASES = (GBNF_CASE, CHAT_CASE, REJECTED_CASE, SPECIAL_CASE)
# a schema llguidance cannot compile (a $ref to nothing): llama_sampler_llg_new logs the error and
# returns no matcher (common/llguidance.cpp:25-30), and the sampler it belongs to then lets every
# token through. A client should be told; `refused` when it is, `ignored` when the answer is
# HTTP 200 with unconstrained text
REJECTED_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"colour": {"$ref": "#/$defs/missing"}}, "required": ["colour"]}
LLG_ERROR = re.compile(r"llg error: (.*)")
GREEDY_LINE = "tokenizer is not byte exact"


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
    return G.Case(SPECIAL_CASE, literal_grammar(literal), lambda s, lit=literal: s == lit,
                  f"a literal spelling the special token {text!r} as text", lambda s, lit=literal: lit.startswith(s))


def case_spec(case: str, vocab: Vocab | None = None) -> G.Case:
    """The `generate.Case` of a server case: the matrix's own, the JSON case for the extra JSON
    cases, the vocab's special literal for `special_literal`."""
    if case == SPECIAL_CASE:
        spec = special_case(vocab) if vocab is not None else None
        if spec is None:
            raise InputError(f"case {case}", "the vocab has no end-of-turn token with printable text")
        return spec
    return judge_case(case)


def judge_case(case: str) -> G.Case:
    """The `generate.Case` whose check judges `case` (the extra cases judge as the JSON case; the
    rejected schema is judged by whether the server said so, in `ask`)."""
    if case == SPECIAL_CASE:
        return G.CASES["forced_literal"]  # its prompt: the special literal is judged by `case_spec`
    return G.CASES["json_enum" if case in EXTRA_CASES else case]


def violation_grammar(case: str) -> str:
    """The llguidance grammar whose truth mask finds an output's first violation. The GBNF and
    chat cases are judged against the plain schema (llguidance's flexible whitespace), since the
    server's GBNF allows whitespace the JSON case's compact option would not."""
    return json_grammar(G.JSON_SCHEMA) if case in EXTRA_CASES else G.CASES[case].grammar


def request_for(case: str, prompt: G.Prompt, n_predict: int, seed: int, temperature: float,
                vocab: Vocab | None = None) -> tuple[str, str, dict[str, Any]]:
    """(endpoint, how the constraint is sent, body) for one case."""
    common: dict[str, Any] = {"n_predict": n_predict, "temperature": temperature, "seed": seed, "return_tokens": True,
                              "cache_prompt": False}
    if case == CHAT_CASE:
        c = G.CASES["json_enum"]
        return "/v1/chat/completions", "response_format", {
            "messages": [{"role": "user", "content": c.instruction}], "max_tokens": n_predict, "temperature": temperature,
            "seed": seed, "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": {**G.JSON_SCHEMA, **G.JSON_OPTIONS}}}}
    body = {"prompt": prompt.text, **common}
    if case == REJECTED_CASE:
        return "/completion", "json_schema", {**body, "json_schema": REJECTED_SCHEMA}
    if case == "json_enum":
        return "/completion", "json_schema", {**body, "json_schema": {**G.JSON_SCHEMA, **G.JSON_OPTIONS}}
    if case == GBNF_CASE:
        return "/completion", "grammar (GBNF)", {**body, "grammar": gbnf_of(G.JSON_SCHEMA)}
    if case == "":
        return "/completion", "none", body
    grammar = case_spec(case, vocab).grammar if case == SPECIAL_CASE and vocab is not None else (
        G.CASES[case].grammar if case in G.CASES else "")
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
    tokens: list[int] = field(default_factory=list)
    tok_s: float = 0.0  # timings.predicted_per_second

    def row(self) -> dict[str, Any]:
        """The tidy, deterministic columns (tokens and timings are kept apart). A real model's text
        and length vary across CPUs of one kind (`generate.MatrixRow.row`): its row keeps the
        outcome, and the text goes to the result's `outputs`."""
        row = {k: v for k, v in self.__dict__.items() if k not in ("tokens", "tok_s")}
        if not self.synthetic:
            row.update(output="", n_tokens=0)
        return row


def show_text_of(text: str, limit: int = 80) -> str:
    """Unconstrained text, cut: what came back where a grammar was ignored is noise past a few words."""
    return text if len(text) <= limit else text[:limit] + "…"


def _strip_eog(vocab: Vocab, tokens: list[int]) -> tuple[list[int], bool]:
    import llama_cpp

    for i, t in enumerate(tokens):
        if llama_cpp.llama_vocab_is_eog(vocab.llama_vocab, t):
            return tokens[:i], True
    return tokens, False


def _content(body: dict[str, Any], endpoint: str) -> tuple[str, list[int], str, float]:
    """(text, tokens, stop type, tokens/s) from a response body."""
    timings = body.get("timings") or {}
    tps = float(timings.get("predicted_per_second") or 0.0)
    if endpoint == "/completion":
        return str(body.get("content", "")), [int(t) for t in body.get("tokens") or []], str(body.get("stop_type", "")), tps
    choice = (body.get("choices") or [{}])[0]
    text = str((choice.get("message") or {}).get("content") or "")
    return text, [], str(choice.get("finish_reason", "")), tps


def ask(srv: S.Server, vocab: Vocab, model: str, synthetic: bool, llg: str, sampler: str, case: str, prompt: G.Prompt,
        max_tokens: int, seed: int, temperature: float, timeout: float = S.REQUEST_TIMEOUT) -> ServerRow:
    """One case, one request, judged."""
    endpoint, sent_as, body = request_for(case, prompt, max_tokens, seed, temperature, vocab)
    start = srv.log_size()
    reply = S.post(srv, endpoint, body, timeout)
    log = srv.settled_log(start)
    llg_errs = LLG_ERROR.findall(log)
    # the warning comes once per vocab, so it is remembered rather than the whole log read again
    srv.said_greedy = srv.said_greedy or GREEDY_LINE in log
    greedy = srv.said_greedy

    def row(outcome: str, text: str = "", tokens: list[int] | None = None, stop: str = "", error: str = "", tps: float = 0.0) -> ServerRow:
        return ServerRow(model, vocab.name, synthetic, llg, sampler, case, endpoint, sent_as, reply.status,
                         reply.error != "", outcome, len(llg_errs), greedy, len(tokens or []), text, stop_type=stop,
                         error=first_line(error or (llg_errs[0] if llg_errs else "")), tokens=tokens or [], tok_s=tps)

    if reply.status == 0:
        alive = "" if srv.alive() else f"; the server exited ({srv.last_lines()})"
        return row("no answer", error=reply.text + alive)
    if case == REJECTED_CASE:
        loud = reply.status != 200 or bool(reply.error) or reply.body is None
        text = "" if loud or reply.body is None else _content(reply.body, endpoint)[0]
        return row("refused" if loud else "ignored", show_text_of(text), stop=str((reply.body or {}).get("stop_type", "")),
                   error=reply.error or (llg_errs[0] if llg_errs else ""))
    if reply.status != 200 or reply.error or reply.body is None:
        return row("error", error=reply.error or reply.text[:300])
    text, tokens, stop, tps = _content(reply.body, endpoint)
    if case == "":  # the unconstrained baseline: only its speed is wanted
        return row("unconstrained", text, tokens, stop, tps=tps)
    c = case_spec(case, vocab)
    if endpoint == "/completion":
        tokens, eog = _strip_eog(vocab, tokens)
        g = G.Generation(tokens=tokens, output=vocab.real_bytes(tokens), stop="eog" if eog or stop == "eos" else "limit" if stop == "limit" else stop)
        judged_by = c.grammar if case == SPECIAL_CASE else violation_grammar(case)
        shown = G.recorded_output(vocab, G.Case(case, judged_by, c.check, c.description), g)
        at = G.first_violation(vocab, judged_by, tokens)
    else:
        g = G.Generation(output=text.encode(), stop="limit" if stop == "length" else "eog")
        shown, at = text, None
    r = row(G.judge(c, g), shown, tokens, stop, tps=tps)
    r.first_violation = at
    return r


@dataclass
class LoadResult:
    model: str
    llguidance: str
    sampler: str
    requests: int
    parallel: int
    passed: int
    violations: int
    other: int  # truncated, errors, no answer
    differ_from_sequential: int  # requests whose outcome is not the same case's sequential outcome
    healthy_after: bool
    llg_errors: int
    seconds: float
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


def load(exe: Path, model: Path, vocab: Vocab, synthetic: bool, llg: str, sampler: str, cases: list[str],
         prompts: dict[str, G.Prompt], sequential: dict[str, str], log_path: Path, requests: int = 32, parallel: int = 4,
         max_tokens: int = 64, seed: int = 0, n_gpu_layers: int = 0) -> LoadResult:
    """`requests` constrained requests (the cases in turn) over `parallel` slots at once, every
    output judged; `sequential` holds each case's outcome from the one-at-a-time run, so a slot
    whose matcher died touching another shows as an outcome that changed."""
    t0 = time.perf_counter()
    order = [cases[i % len(cases)] for i in range(requests)]
    # one thread: ggml's threads spin while they wait, and on 2 shared cores two of them beside the
    # client's judging threads made each request 60 times slower than one at a time
    with S.serve(exe, model, log_path, parallel=parallel, threads=1, n_gpu_layers=n_gpu_layers,
                 extra=server_extra(vocab.overrides)) as srv:
        taken(srv, vocab.overrides)
        with ThreadPoolExecutor(max_workers=parallel) as pool:
            rows = list(pool.map(lambda c: ask(srv, vocab, label(model, vocab), synthetic, llg, sampler, c, prompts[c], max_tokens, seed, 0.0),
                                 order))
        healthy = srv.alive() and S.http_status(srv.base + "/health", 5.0) == 200
        llg_total = len(LLG_ERROR.findall(srv.log()))
    outcomes = [r.outcome for r in rows]
    return LoadResult(label(model, vocab), llg, sampler, requests, parallel, outcomes.count("pass"), outcomes.count("violation"),
                      len(outcomes) - outcomes.count("pass") - outcomes.count("violation"),
                      sum(1 for r in rows if r.outcome != sequential.get(r.case)), healthy, llg_total,
                      round(time.perf_counter() - t0, 3),
                      "; ".join(sorted({f"{r.case} ({r.stop_type}): {r.output[:40]!r}" for r in rows if r.outcome == "violation"})[:3]))


# -- the port against the server -------------------------------------------------------------
@dataclass(frozen=True)
class DiffCell:
    model: str
    case: str
    sampler: str
    port_outcome: str
    server_outcome: str
    compared_tokens: int  # up to the first violation of either (or all, when neither broke the grammar)
    first_differing_token: int | None  # its index, None when the tokens agree that far
    same: bool

    def row(self) -> dict[str, Any]:
        return dict(self.__dict__)


def differential(matrix: dict[str, Any], served: dict[str, Any]) -> list[DiffCell]:
    """Each (model, case, sampler) the port's matrix (`matrix`, a matrix result) and the server
    (`served`, a server result, on the llguidance the port drives) both ran.

    The tokens are compared up to the server's first violation (its row's `first_violation`,
    found by the truth bridge when it ran), or all of them when it has none: tokens equal that far
    are equally legal on both sides, so no second judge is needed here."""
    port = {(r["model"], r["case"], r["bridge"]): (r, t) for r, t in zip(matrix["rows"], matrix.get("tokens") or [], strict=False)}
    out = []
    for r, toks in zip(served["rows"], served.get("tokens") or [], strict=False):
        if r["llguidance"] != served.get("port_llguidance") or r["endpoint"] != "/completion" or r["case"] in EXTRA_CASES:
            continue
        hit = port.get((r["model"], r["case"], r["sampler"]))
        if hit is None:
            continue
        pr, ptoks = hit
        fv = r.get("first_violation")
        n = len(toks) if fv is None else min(len(toks), fv + 1)
        diff = next((i for i in range(min(n, len(ptoks))) if ptoks[i] != toks[i]), None)
        if diff is None and (len(ptoks) < n or (fv is None and len(ptoks) != len(toks))):
            diff = min(len(ptoks), n)  # one stopped where the other went on
        out.append(DiffCell(r["model"], r["case"], r["sampler"], pr["outcome"], r["outcome"], n, diff,
                            pr["outcome"] == r["outcome"] and diff is None))
    return sorted(out, key=lambda d: (d.model, d.case, d.sampler))


def payload(model: Path, run: "Run", settings: dict[str, Any]) -> dict[str, Any]:
    """The server notebook's result (`results.SCHEMAS["server"]`): the settings, each case's prompt
    and how it was sent, a row per (llguidance, sampler, case), the tokens, the load test, the
    builds' sha256 (so a rebuilt server makes the result stale), and the timings kept apart."""
    from .results import file_sha256

    cases = sorted({r.case for r in run.rows}, key=[*G.CASES, *EXTRA_CASES].index)
    return {
        "model": model.name, "llguidance": run.llguidance, "port_llguidance": run.port_llguidance, **settings,
        "n_gpu_layers": run.n_gpu_layers,
        "cases": {c: {"prompt": run.prompts[c].text, "prompt_kind": run.prompts[c].kind,
                      "sent_as": request_for(c, run.prompts[c], 1, 0, 0.0)[1],
                      **({"grammar": run.special_grammar} if c == SPECIAL_CASE else {})} for c in cases},
        "builds": {b.name: file_sha256(b) for b in S.builds() if b.exists()},
        "rows": [r.row() for r in run.rows], "tokens": [r.tokens for r in run.rows], "outputs": [r.output for r in run.rows], "load": [x.row() for x in run.loads],
        "timing": {"constrained_tok_s": [{"llguidance": r.llguidance, "sampler": r.sampler, "case": r.case, "tok_s": r.tok_s}
                                         for r in run.rows],
                   "unconstrained_tok_s": run.baseline,
                   "load_seconds": [{"llguidance": x.llguidance, "sampler": x.sampler, "seconds": x.seconds} for x in run.loads]},
    }


def _failed_rows(vocab: Vocab, model: str, synthetic: bool, llg: str, sampler: str, cases: list[str], prompts: dict[str, G.Prompt],
                 outcome: str, why: str) -> list[ServerRow]:
    return [ServerRow(model, vocab.name, synthetic, llg, sampler, c, *request_for(c, prompts.get(c, G.PLAIN), 1, 0, 0.0)[:2],
                      0, False, outcome, 0, False, 0, "", error=first_line(why)) for c in cases]


def run_build(exe: Path, model: Path, vocab: Vocab, synthetic: bool, llg: str, sampler: str, cases: list[str],
              prompts: dict[str, G.Prompt], log_path: Path, max_tokens: int, seed: int, temperature: float,
              n_gpu_layers: int = 0, timeout: float = S.REQUEST_TIMEOUT) -> tuple[list[ServerRow], float]:
    """Every case through one server build, one request at a time; (rows, unconstrained tokens/s).
    The vocab's key overrides (`Vocab.overrides`) go to the server as `--override-kv`.

    A server that cannot load the model (or whose log does not show an override taken) fails
    every case with its reason; one that stops answering fails the case it was asked and every
    later one, with its log's last lines."""
    rows: list[ServerRow] = []
    try:
        with S.serve(exe, model, log_path, n_gpu_layers=n_gpu_layers, extra=server_extra(vocab.overrides)) as srv:
            taken(srv, vocab.overrides)
            base = ask(srv, vocab, label(model, vocab), synthetic, llg, sampler, "", prompts.get(cases[0], G.PLAIN), max_tokens, seed,
                       temperature, timeout) if cases else None
            for i, c in enumerate(cases):
                r = ask(srv, vocab, label(model, vocab), synthetic, llg, sampler, c, prompts[c], max_tokens, seed, temperature, timeout)
                rows.append(r)
                if r.outcome == "no answer":
                    rest = cases[i + 1:]
                    rows += _failed_rows(vocab, label(model, vocab), synthetic, llg, sampler, rest, prompts, "no answer",
                                         f"the server stopped answering at {c!r}: {srv.last_lines()}")
                    break
    except S.ServerError as e:
        return rows + _failed_rows(vocab, label(model, vocab), synthetic, llg, sampler, cases[len(rows):], prompts, "error", str(e)), 0.0
    return rows, base.tok_s if base else 0.0


def prompts_for(llm: Any, cases: list[str], style: str) -> dict[str, G.Prompt]:
    """The port's matrix prompts (`generate.prompt_for`), the extra cases taking the JSON case's."""
    return {c: G.prompt_for(llm, judge_case(c), style) for c in cases}


LOG_DIR = S.SERVER / "logs"  # each server's log, per input and build (generated, not a result)


@dataclass
class Run:
    """One model through every server build."""

    rows: list[ServerRow]
    loads: list[LoadResult]
    baseline: dict[str, float]  # "SAMPLER-LLG" -> unconstrained tokens/s
    prompts: dict[str, G.Prompt]
    llguidance: list[str]
    port_llguidance: str
    n_gpu_layers: int = 0  # as the servers ran (the parameter, or make's N_GPU_LAYERS)
    special_grammar: str = ""  # the special literal's grammar on this vocab


def run(name: str, model: Path, synthetic: bool, instruct: bool | None, cases: list[str], prompt: str = "auto",
        samplers: tuple[str, ...] = S.SAMPLERS, temperature: float = 0.0, seed: int = 0, max_tokens: int = 64,
        load_requests: int = 0, parallel: int = 4, n_gpu_layers: int = 0, say: Any = print,
        candidates: tuple[str, ...] = S.CANDIDATES, overrides: list[str] | tuple[str, ...] = ()) -> Run:
    """Every case on every built server (`server.built`), one request at a time, then, when
    `load_requests`, the load test (synthetic models only: a real model on 2 cores would take
    minutes per build). The load test is `make bench`'s (`bench.server_load`), not the report's: how
    a server batches concurrent requests changes from run to run, and so, on some runs, does the
    outcome. The candidate patches' servers (`candidates`) answer the same cases on llguidance as
    llama.cpp pins it, with no load test. Raises InputError with the build's reason when no server
    is built. llama.cpp's key `overrides` (KEY=TYPE:VALUE) go to every load: the vocab, the
    prompts' model and each server (`--override-kv`)."""
    status, why = S.built()
    if why:
        raise InputError(f"server for {name}", why)
    n_gpu_layers = P.gpu_layers(n_gpu_layers)
    unknown = [c for c in cases if c not in G.CASES and c not in EXTRA_CASES]
    if unknown:
        raise InputError("parameter cases", f"unknown case(s) {unknown}; choose from {[*G.CASES, *EXTRA_CASES]}")
    G.check_generative(model)
    vocab = Vocab(model, name, overrides)
    if SPECIAL_CASE in cases and special_case(vocab) is None:
        say(f"{name}: no end-of-turn token with printable text: {SPECIAL_CASE} left out")
        cases = [c for c in cases if c != SPECIAL_CASE]
    llm = G.load_model(model, n_ctx=64, overrides=vocab.overrides)  # only for the prompts: the chat template and the tokens of its text
    style = G.prompt_style(llm, prompt, synthetic, instruct)
    prompts = prompts_for(llm, cases, style)
    del llm
    versions = list(status["llguidance"])
    rows: list[ServerRow] = []
    loads: list[LoadResult] = []
    baseline: dict[str, float] = {}
    pin = S.LLG_PINNED if S.LLG_PINNED in versions else versions[0]
    for llg in versions:
        for s in (*samplers, *(candidates if llg == pin else ())):
            exe = S.binary(s, llg)
            if s in candidates and not exe.exists():
                say(f"{exe.name}: not built, left out")
                continue
            got, base = run_build(exe, model, vocab, synthetic, llg, s, cases, prompts, LOG_DIR / name / f"{exe.name}.log",
                                  max_tokens, seed, temperature, n_gpu_layers)
            rows += got
            baseline[f"{s}-{llg}"] = base
            passed = sum(r.outcome == "pass" for r in got)
            say(f"{exe.name}: {passed}/{len(got)} pass, {sum(r.llg_errors for r in got)} llg errors, "
                f"{sum(r.error_field for r in got)} error fields")
            if synthetic and load_requests and s not in candidates:
                loaded = [c for c in cases if c not in (CHAT_CASE, REJECTED_CASE, SPECIAL_CASE)]
                try:
                    x = load(exe, model, vocab, synthetic, llg, s, loaded, prompts, {r.case: r.outcome for r in got},
                             LOG_DIR / name / f"{exe.name}-load.log", load_requests, parallel, max_tokens, seed, n_gpu_layers)
                    loads.append(x)
                    say(f"  load: {x.requests} requests over {x.parallel} slots: {x.violations} violations, "
                        f"{x.differ_from_sequential} differ from one at a time, healthy after: {x.healthy_after}")
                except S.ServerError as e:
                    say(f"  load: {first_line(str(e))}")
    spec = special_case(vocab) if SPECIAL_CASE in cases else None
    return Run(rows, loads, baseline, prompts, versions, S.venv_llguidance(), n_gpu_layers, spec.grammar if spec else "")
