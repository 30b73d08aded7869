"""The end-to-end matrix through the product: llama-server, shipped and patched, asked as a client asks.

`generate` runs the matrix through the Python port inside llama-cpp-python's decode loop. This
module asks the real `llama-server` (`llama_server`: four builds, two samplers by two llguidance
versions) the same cases (`cases`: what is sent, and how), on the same models with the same
prompts, and judges every output with `generate`'s own independent checks (`judge`: by the
answer's bytes, the server's own `content` beside). Here is the running: the builds, a server
started per build (`ServerRun`: one build asked one model's cases), the load test.

Temperature 0 and a fixed seed. For each request: the HTTP status, whether the body has an error
field, the text, the `llg error` lines the server logged while it ran (requests are sent one at a
time, so the log between two requests is that request's), tokens per second from the response's
own `timings`, and the outcome. `load_test()` sends 32 constrained requests over 4 slots at once.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from ... import cases as C
from ... import generation as G
from ... import nb
from ... import params as P
from ...errors import InputError, first_line
from ...modelfile import ModelFile
from ...overrides import Override, check_log, model_label
from ...paths import RESULTS, ROOT, resolve
from ...results import file_sha256
from ...vocab import Vocab
from . import ServerPayload
from . import llama_server as S
from .cases import (
    CHAT_CASE,
    EXTRA_CASES,
    REJECTED_CASE,
    SPECIAL_CASE,
    SPECIAL_CASES,
    SPECIAL_PATTERN_CASE,
    Ask,
    asks_for,
    curl_for,
    prompts_for,
    request_for,
    special_case,
    special_pattern_schema,
)
from .causes import cause_of, request_fault
from .judge import DISAGREES, ServerRow, judged_row, reply_content, show_text_of

LLG_ERROR = re.compile(r"llg error: (.*)")
GREEDY_LINE = "tokenizer is not byte exact"


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


def taken(srv: S.Server, overrides: tuple[Override, ...]) -> None:
    """ServerError unless the server's log shows llama.cpp taking every override."""
    if overrides:
        try:
            check_log(overrides, srv.log(), f"{srv.binary.name} on {srv.model.name}")
        except InputError as e:
            raise S.ServerError(str(e)) from None


@dataclass(frozen=True)
class ServerRun:
    """One server build asked one model's cases: what each of its requests and rows carries
    unchanged."""

    exe: Path  # the build
    model: Path
    vocab: Vocab  # the model's: the judge reads the tokens by it, the server loads its overrides
    synthetic: bool
    llg: str  # the llguidance the build links
    sampler: str  # the build: upstream, fixed, or a candidate patch's
    cases: list[str]
    prompts: dict[str, G.Prompt]
    log_path: Path  # the server's log
    max_tokens: int
    seed: int
    temperature: float
    n_gpu_layers: int = 0
    timeout: float = S.REQUEST_TIMEOUT  # seconds for one request
    # every case as asked on this run, made once here (`asks_for`): each request posts its body and
    # the judge reads its check, so neither goes back to `cases`
    asks: dict[str, Ask] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        asked = asks_for(self.cases, self.prompts, self.max_tokens, self.seed, self.temperature, self.vocab)
        object.__setattr__(self, "asks", asked)

    @property
    def label(self) -> str:
        return label(self.model, self.vocab)


@contextmanager
def _serving(run: ServerRun, log: Path, parallel: int = 1) -> Iterator[S.Server]:
    """`run`'s build started on its model, its log at `log`, every override it loads taken.

    One thread: ggml's threads spin while they wait, and on 2 shared cores two of them beside the
    client's judging threads made each load-test request 60 times slower than one at a time."""
    extra = S.override_args(run.vocab.overrides)
    with S.serve(
        run.exe, run.model, log, parallel=parallel, threads=1, n_gpu_layers=run.n_gpu_layers, extra=extra
    ) as srv:
        taken(srv, run.vocab.overrides)
        yield srv


def ask(srv: S.Server, run: ServerRun, case: str) -> ServerRow:
    """One case, one request, judged, with the `llg error` lines the server logged meanwhile
    (requests are sent one at a time, so the log between two is that request's)."""
    a = run.asks[case]
    start = srv.log_size()
    reply = S.post(srv, a.endpoint, a.body, run.timeout)
    log = srv.settled_log(start)
    # the warning comes once per vocab, so it is remembered rather than the whole log read again
    srv.said_greedy = srv.said_greedy or GREEDY_LINE in log
    got = answered(srv, run, a, reply, LLG_ERROR.findall(log), srv.said_greedy)
    if got.http_status != 200 or got.error_field or got.outcome == "no answer":
        got.cause = cause_of(got.http_status, reply.error or reply.text[:300], log, run.vocab)[1]
    return got


def answered(srv: S.Server, run: ServerRun, a: Ask, reply: S.Reply, llg_errs: list[str], greedy: bool) -> ServerRow:
    """The row of one reply. Reads the server's state (is it alive, its last log lines) and changes
    nothing: the load test calls it from several threads."""

    def row(
        outcome: str, text: str = "", tokens: list[int] | None = None, stop: str = "", error: str = "", tps: float = 0.0
    ) -> ServerRow:
        return ServerRow(
            run.label,
            run.vocab.name,
            run.synthetic,
            run.llg,
            run.sampler,
            a.case,
            a.endpoint,
            a.sent_as,
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
    if a.case == REJECTED_CASE:
        loud = reply.status != 200 or bool(reply.error) or reply.body is None
        text = "" if loud or reply.body is None else reply_content(reply.body, a.endpoint)[0]
        return row(
            "refused" if loud else "ignored",
            show_text_of(text),
            stop=str((reply.body or {}).get("stop_type", "")),
            error=reply.error or (llg_errs[0] if llg_errs else ""),
        )
    if reply.status != 200 or reply.error or reply.body is None:
        return row("error", error=reply.error or reply.text[:300])
    return judged_row(row, run.vocab, a, reply.body)


def load_test(
    run: ServerRun, sequential: dict[str, str], requests: int = 32, parallel: int = 4
) -> tuple[LoadResult, list[ServerRow]]:
    """`requests` constrained requests (`run`'s cases in turn) over `parallel` slots at once, every
    output judged; `sequential` holds each case's outcome from the one-at-a-time run, so a slot
    whose matcher died touching another shows as an outcome that changed. Returns the summary and
    each request's row (its `content_match` the server's own word on its bytes).

    The threads share the server handle and the vocab, and change neither: each posts, then
    judges its own reply (`answered`); the log is read once, after every answer is in."""
    t0 = time.perf_counter()
    order = [run.cases[i % len(run.cases)] for i in range(requests)]

    def one(srv: S.Server, case: str) -> ServerRow:
        a = run.asks[case]
        return answered(srv, run, a, S.post(srv, a.endpoint, a.body), [], False)

    with _serving(run, run.log_path, parallel) as srv:
        with ThreadPoolExecutor(max_workers=parallel) as pool:
            rows = list(pool.map(lambda c: one(srv, c), order))
        healthy = srv.alive() and S.answers_health(srv, 5.0)
        llg_total = len(LLG_ERROR.findall(srv.log()))
    outcomes = [r.outcome for r in rows]
    counted = ("pass", "violation", DISAGREES)
    result = LoadResult(
        run.label,
        run.llg,
        run.sampler,
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
        violating=_violating(rows),
    )
    return result, rows


def _violating(rows: list[ServerRow]) -> str:
    """The load test's violations, at most three, each as its case, stop type and the text's
    start: the suite's annotation after it ("…[56 more tokens after …]") is never cut."""
    shown = {f"{r.case} ({r.stop_type}): {r.output.split('…[')[0][:40]!r}" for r in rows if r.outcome == "violation"}
    return "; ".join(sorted(shown)[:3])


def payload(model: Path, run: ModelRun, settings: dict[str, Any]) -> ServerPayload:
    """The server notebook's result (`results.SCHEMAS["server"]`): the settings, each case's prompt
    and how it was sent, a row per (llguidance, sampler, case), the tokens, the load test, the
    builds' sha256 (so a rebuilt server makes the result stale), and the timings kept apart."""
    cases = sorted({r.case for r in run.rows}, key=[*C.CASES, *EXTRA_CASES].index)
    out = {
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
    return cast(ServerPayload, out)


def _failed_rows(run: ServerRun, cases: list[str], why: str) -> list[ServerRow]:
    """An error row for each of `cases` the build could not be asked, `why` its error."""
    return [
        ServerRow(
            run.label,
            run.vocab.name,
            run.synthetic,
            run.llg,
            run.sampler,
            c,
            run.asks[c].endpoint,
            run.asks[c].sent_as,
            0,
            False,
            "error",
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


def run_cases(run: ServerRun, unconstrained: bool = True) -> tuple[list[ServerRow], float]:
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
    lost = ""
    first = run.log_path
    for log in (first, first.with_name(f"{first.stem}-retry{first.suffix}")):
        rows: list[ServerRow] = []
        try:
            base, why = _attempt(run, log, rows, unconstrained)
        except S.ServerError as e:
            _fault_unless_answered(run, lost, e)
            return rows + _failed_rows(run, run.cases[len(rows) :], str(e)), 0.0
        if not why:
            return rows, base
        if lost:
            raise ServerFault(_where(run), f"{why}, and again from a fresh server")
        lost = why
    raise AssertionError("unreachable: the second loss raised")


def _where(run: ServerRun) -> str:
    return f"server {run.exe.name} on {run.model.name}"


def _attempt(run: ServerRun, log: Path, rows: list[ServerRow], unconstrained: bool) -> tuple[float, str]:
    """One fresh server asked every case, each row added to `rows`: (unconstrained tokens/s, why
    it was lost or "")."""
    asks = [*run.cases, *([""] if unconstrained and run.cases else [])]  # "": the unconstrained request, last
    with _serving(run, log) as srv:
        for c in asks:
            r = ask(srv, run, c)
            if fault := request_fault(r.http_status, r.error):
                # the same request gets the same fault from a fresh server: the run fails, naming it
                said = f"case {c!r}" if c else "the unconstrained request"
                raise ServerFault(_where(run), f"{said}: {fault}; nothing was measured; its log {_shown_log(log)}")
            if r.outcome == "no answer":
                said = f"case {c!r}" if c else "the unconstrained request"
                why = r.error.removeprefix("no answer: ")  # says the log's last lines where it exited
                ends = "" if "the server exited" in why else f" ends: {srv.last_lines()}"
                return 0.0, f"no answer at {said} ({why}); its log {_shown_log(log)}{ends}"
            if not c:
                return r.tok_s, ""
            rows.append(r)
    return 0.0, ""


def _fault_unless_answered(run: ServerRun, lost: str, e: S.ServerError) -> None:
    """ServerFault where a server that did not start is a fault of the run, not error rows: the
    fresh server after a lost one, or a without-fix or with-fix build that never started."""
    if lost:  # the fresh server did not even start: the fault stands
        raise ServerFault(_where(run), f"{lost}; a fresh one then: {e}") from None
    if isinstance(e, S.NotStarted) and run.sampler in S.SAMPLERS:
        # no request reached it: error rows would read as a build that broke no grammar
        raise ServerFault(_where(run), f"never started, nothing measured: {first_line(str(e))}") from None


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


@dataclass(frozen=True)
class RunOptions:
    """`run`'s settings beyond the model and its cases."""

    prompt: str = "auto"
    samplers: tuple[str, ...] = S.SAMPLERS
    temperature: float = 0.0
    seed: int = 0
    max_tokens: int = 64
    load_requests: int = 0
    parallel: int = 4
    n_gpu_layers: int = 0
    candidates: tuple[str, ...] = S.CANDIDATE_BUILDS
    overrides: tuple[Override, ...] = ()  # `Input.load_overrides`
    log_dir: Path | None = None
    load_rounds: int = 1


DEFAULT_OPTIONS = RunOptions()


@dataclass
class _Tally:
    """What `run` gathers build by build."""

    rows: list[ServerRow] = field(default_factory=list)
    loads: list[LoadResult] = field(default_factory=list)
    baseline: dict[str, float] = field(default_factory=dict)
    disputed: list[ServerRow] = field(default_factory=list)  # the load tests' answers the judge disputes
    confirmed: list[dict[str, Any]] = field(default_factory=list)  # `ModelRun.load_violations`


def run(
    name: str,
    model: ModelFile,
    synthetic: bool,
    instruct: bool | None,
    cases: list[str],
    opts: RunOptions = DEFAULT_OPTIONS,
    say: Callable[[str], Any] = print,
) -> ModelRun:
    """Every case on every built server (`server.built`), one request at a time, then, when
    `load_requests`, the load test (synthetic models only: a real model on 2 cores would take
    minutes per build). The load test is `make bench`'s (`bench.server_load`), not the report's: how
    a server batches concurrent requests changes from run to run, and so, on some runs, does the
    outcome. The candidate patches' servers (`candidates`) answer the same cases on llguidance as
    llama.cpp pins it, with no load test. `load_rounds` repeats the load test on each build (a
    fresh server each time): an outcome that comes and goes shows as a spread. Each server's log goes
    to `log_dir`/NAME (default `LOG_DIR`). llama.cpp's key `overrides` go to every
    load: the vocab, the prompts' model and each server (`--override-kv`), all of them `opts`'
    fields. `model` is its `ModelFile`, its header read where it entered: nothing here reads it
    again. Raises InputError with the build's reason when no server is built,
    and JudgeDisagrees, naming the request, when the judge's bytes and a server's own `content`
    disagree on any answer: a finding about the server is the server's own words."""
    status, why = S.built()
    if why:
        raise InputError(f"server for {name}", why)
    opts = replace(opts, n_gpu_layers=P.gpu_layers(opts.n_gpu_layers))
    unknown = [c for c in cases if c not in C.CASES and c not in EXTRA_CASES]
    if unknown:
        raise InputError("parameter cases", f"unknown case(s) {unknown}; choose from {[*C.CASES, *EXTRA_CASES]}")
    model.require_generative()
    # a real model is the input itself: the vocab this kernel's analyses of it loaded, and the truth
    # bridge they built (`nb.cached_vocab`); a synthetic model is a file of its own
    vocab = nb.cached_vocab(model, name, opts.overrides) if not synthetic else Vocab(model, name, opts.overrides)
    vocab.require_text()
    cases = _askable(name, vocab, cases, say)
    prompts = _prompts(model, vocab, cases, opts.prompt, synthetic, instruct)
    versions = list(status["llguidance"])
    tally = _Tally()
    logs = (opts.log_dir or LOG_DIR) / name
    for llg, s, exe in _builds(versions, opts, say):
        log = logs / f"{exe.name}.log"
        asked = (opts.max_tokens, opts.seed, opts.temperature, opts.n_gpu_layers)
        _run_one_build(
            ServerRun(exe, model.path, vocab, synthetic, llg, s, cases, prompts, log, *asked), opts, tally, say
        )
    _publishable(name, tally)
    spec = special_case(vocab) if SPECIAL_CASE in cases else None
    return ModelRun(
        tally.rows,
        tally.loads,
        tally.baseline,
        prompts,
        versions,
        S.venv_llguidance(),
        opts.n_gpu_layers,
        spec.grammar if spec else "",
        (special_pattern_schema(vocab) or {}) if SPECIAL_PATTERN_CASE in cases else {},
        tally.confirmed,
    )


def _askable(name: str, vocab: Vocab, cases: list[str], say: Callable[[str], Any]) -> list[str]:
    """`cases` without bug C's two where the vocab has no end-of-turn token with printable text."""
    if special_case(vocab) is None and any(c in SPECIAL_CASES for c in cases):
        say(
            f"{name}: no end-of-turn token with printable text: {', '.join(c for c in cases if c in SPECIAL_CASES)} "
            f"left out"
        )
        return [c for c in cases if c not in SPECIAL_CASES]
    return cases


def _prompts(
    model: ModelFile, vocab: Vocab, cases: list[str], prompt: str, synthetic: bool, instruct: bool | None
) -> dict[str, G.Prompt]:
    """Each case's prompt, as the port's matrix prompts the model (`prompts_for`), rendered from
    its header and vocab: the server loads the weights, and nothing here needs them."""
    chat = G.Chat.of(model, vocab)
    return prompts_for(chat, cases, G.prompt_style(chat, prompt, synthetic, instruct))


def _builds(versions: list[str], opts: RunOptions, say: Callable[[str], Any]) -> Iterator[tuple[str, str, Path]]:
    """(llguidance, sampler, binary) of every build to ask: both samplers on every llguidance, the
    candidates' on the one llama.cpp pins (the first, where that one is not built), each candidate
    whose binary is not built left out."""
    pin = S.LLG_PINNED if S.LLG_PINNED in versions else versions[0]
    for llg in versions:
        for s in (*opts.samplers, *(opts.candidates if llg == pin else ())):
            exe = S.binary(s, llg)
            if s in opts.candidates and not exe.exists():
                say(f"{exe.name}: not built, left out")
                continue
            yield llg, s, exe


def _run_one_build(run: ServerRun, opts: RunOptions, tally: _Tally, say: Callable[[str], Any]) -> None:
    """`run`'s cases, then its load test where `opts` asks for one, into `tally`."""
    # the unconstrained request runs no line of the grammar sampler, so it is asked of the first
    # build only: the same 64 tokens on every build cost gemma3-270m 1.3 s a build
    got, base = run_cases(run, unconstrained=not tally.baseline)  # none answered yet
    tally.rows += got
    if base:
        tally.baseline[f"{run.sampler}-{run.llg}"] = base
    passed = sum(r.outcome == "pass" for r in got)
    say(
        f"{run.exe.name}: {passed}/{len(got)} pass, {sum(r.llg_errors for r in got)} llg errors, "
        f"{sum(r.error_field for r in got)} error fields"
    )
    if run.synthetic and opts.load_requests and run.sampler not in opts.candidates:
        _load_rounds(run, {r.case: r.outcome for r in got}, opts, tally, say)


def _load_rounds(
    run: ServerRun, sequential: dict[str, str], opts: RunOptions, tally: _Tally, say: Callable[[str], Any]
) -> None:
    """`opts.load_rounds` load tests of `run`'s build, a fresh server each, into `tally`; a round
    that fails says so and costs only its own row."""
    loaded = [c for c in run.cases if c not in (CHAT_CASE, REJECTED_CASE, *SPECIAL_CASES)]
    log = run.log_path.with_name(f"{run.exe.name}-load.log")
    under_load = replace(run, cases=loaded, log_path=log, temperature=0.0)
    for k in range(1, opts.load_rounds + 1):
        try:
            x, answers = load_test(under_load, sequential, opts.load_requests, opts.parallel)
        except Exception as e:  # noqa: BLE001 - the load test's failure costs its own row, never the rows above
            say(f"  load round {k}: {first_line(str(e)) or type(e).__name__}")
            continue
        x.round = k
        tally.loads.append(x)
        tally.disputed += [r for r in answers if r.outcome == DISAGREES]
        tally.confirmed += _confirmed(under_load, k, answers, opts.parallel)
        say(
            f"  load round {k}: {x.requests} requests over {x.parallel} slots: {x.violations} violations, "
            f"{x.judge_disagrees} judge disagreements, {x.differ_from_sequential} differ from one at a "
            f"time, healthy after: {x.healthy_after}"
        )


def _confirmed(run: ServerRun, k: int, answers: list[ServerRow], parallel: int) -> list[dict[str, Any]]:
    """Round `k`'s violations the server's own content confirms, each with the request and the
    server's command line that show it."""
    command = [run.exe.name, "-m", run.model.name, "--parallel", str(parallel), "-t", "1"]
    return [
        {
            "round": k,
            "case": r.case,
            "output": r.output,
            "content_match": r.content_match,
            "curl": curl_for(run.asks[r.case].endpoint, dict(run.asks[r.case].body)),
            "server": " ".join([*command, *S.override_args(run.vocab.overrides)]),
        }
        for r in answers
        if r.outcome == "violation" and r.content_match.startswith("same")
    ]


def _publishable(name: str, tally: _Tally) -> None:
    """JudgeDisagrees where the judge and a server's content disagree on any answer."""
    disputed = [r for r in tally.rows if r.outcome == DISAGREES] + tally.disputed
    if disputed:
        r = disputed[0]
        raise JudgeDisagrees(
            f"server on {name}",
            f"the judge and the server disagree on {r.sampler}-{r.llguidance} {r.case} ({r.content_match}); "
            f"{len(disputed)} answer(s) so, nothing of this run is published",
        )
