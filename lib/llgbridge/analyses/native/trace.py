"""The harness and the port, and the differential between them.

- `harness()` drives the compiled `llama_sampler_init_llg` through `native/harness.cpp`, which
  applies and accepts as `common/sampling.cpp` does and prints the allowed ids of every step;
  the harness links every sampler side by side, and `harness_serve()` runs several samplers' jobs,
  and llama.cpp's tests against them, in one process: one vocab load and one tokenizer build per
  sampler for all;
  `port_trace()` walks the same job through the Python port (`bridges.make_bridge(vocab, sampler)`, the
  same name for the same patch: `upstream`, `fixed`, and each candidate of `builder.PATCH_OF`).
- `differential()` compares the two cell by cell (a cell is one step of one job): the allowed
  set, and the llguidance error where the sampler drops its grammar (or, failing closed, keeps
  only the end of generation).

The jobs (`jobs_for`): the leak grammar at position 0 (guide 4.4), the forced literal followed
step by step as `forced.forced_test` follows it (guide 5.1, 7.2), bug C's literal (the end-of-turn
token's text inside plain text, `special_job`), bug D's grammar (llama.cpp's own "mixed
quantifiers" test, `MIXED_QUANTIFIERS`), and every grammar of the soundness battery along
the walks `soundness` takes.

But:
- the sampler ignores a failed `llg_matcher_consume_token` (common/llguidance.cpp:39-44); the
  error shows at the next mask, where `llama_sampler_llg_apply` logs it and frees the matcher.
  The port's trace does the same, so both report the error at the same step;
- the fixed sampler's greedy fallback is seen from its log line ("not byte exact"), which
  llama.cpp prints once per vocab: the tokenizer is cached per vocab (:141-146).
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import InputError, LlgError, first_line
from ...grammars import literal_grammar
from ...overrides import Override
from .builder import TEST_TIMEOUT, bin_dir, venv_llguidance
from .crashes import crash_cause
from .logs import (
    TestRun,
    check_taken,
    llg_errors,
    parse_ranges,
    program_env,
    read_test,
    run_test,
    timed_out,
)


@dataclass(frozen=True)
class Job:
    """One walk: a grammar, and the tokens to accept (None: follow the lowest allowed id)."""

    id: str
    grammar: str
    tokens: tuple[int, ...] | None
    max_steps: int = 64

    def line(self) -> str:
        toks = "follow" if self.tokens is None else (",".join(map(str, self.tokens)) or ".")
        return f"job {self.id} {self.max_steps} {self.grammar.encode().hex()} {toks}\n"


@dataclass
class Trace:
    """What a sampler allowed along one job. `error` is where it dropped its grammar."""

    allowed: list[np.ndarray] = field(default_factory=list)  # sorted ids, per step
    tokens: list[int] = field(default_factory=list)  # the token accepted after each step (-1: none)
    error: str = ""
    error_step: int | None = None  # the step whose mask failed; None: before any step (grammar rejected)
    log: list[str] = field(default_factory=list)  # the sampler's log while it was built
    apply_ns: list[int] = field(default_factory=list)


def harness_samplers(llg: str | None = None) -> tuple[str, ...]:
    """The samplers linked into the harness built against llguidance `llg` (None: the venv's),
    in its order (`harness --samplers`); () where it is not built."""
    exe = bin_dir(llg) / "harness"
    try:
        key = (str(exe), exe.stat().st_mtime_ns)
    except OSError:
        return ()
    if key not in _LINKED:
        r = subprocess.run([str(exe), "--samplers"], capture_output=True, text=True, timeout=60)
        _LINKED[key] = tuple(r.stdout.split()) if r.returncode == 0 else ()
    return _LINKED[key]


_LINKED: dict[tuple[str, int], tuple[str, ...]] = {}


def _jobs_input(runs: dict[str, list[Job]]) -> bytes:
    return "".join(f"sampler {s}\n" + "".join(j.line() for j in jobs) for s, jobs in runs.items()).encode()


def _parse(sampler: str, out: list[str], jobs: list[Job]) -> tuple[dict[str, Trace], bool]:
    """One sampler's traces from its part of the harness's output, and whether it finished there
    (every job traced, no `@error`); RuntimeError for an `@error` line."""
    traces: dict[str, Trace] = {}
    pending: list[str] = []
    cur: Trace | None = None
    for ln in out:
        if not ln.startswith("@"):
            if ln.strip():
                pending.append(ln.rstrip())
            continue
        word, *rest = ln.split(" ", 6)
        if word == "@job":
            cur = traces[rest[0]] = Trace()
        elif word == "@ready" and cur is not None:
            cur.log = pending
            cur.error = llg_errors(pending)
        elif word == "@step" and cur is not None:
            _, i, _n, tok, ns, rng = rest
            if not cur.error and (e := llg_errors(pending)):
                cur.error, cur.error_step = e, int(i)
            cur.allowed.append(parse_ranges(rng))
            cur.tokens.append(int(tok))
            cur.apply_ns.append(int(ns))
        elif word == "@error":
            # llama.cpp's loader says why in its log: an allocation failure is the one worth naming
            why = crash_cause("\n".join(pending))
            oom = f" ({why})" if why.startswith("out of memory") else ""
            raise RuntimeError(f"harness-{sampler}: {' '.join(rest)}{oom}")
        if word != "@vocab":
            pending = []
    return traces, len(traces) == len(jobs)


def harness(
    sampler: str,
    vocab_path: Path,
    jobs: list[Job],
    timeout: int = TEST_TIMEOUT,
    llg: str | None = None,
    overrides: tuple[Override, ...] = (),
) -> dict[str, Trace]:
    """Run `jobs` through the compiled sampler (linked against llguidance `llg`, None: the
    venv's), with llama.cpp's key `overrides` (kv_override.cpp); traces by job id. The harness
    process serves this sampler only (`harness_each` serves several).

    Raises RuntimeError with why (`crash_cause`) when it does not finish (an abort inside
    llama.cpp, for instance), or when its log does not show an override taken.
    """
    exe = bin_dir(llg) / "harness"
    r = subprocess.run(
        [str(exe), str(vocab_path)],
        input=_jobs_input({sampler: jobs}),
        capture_output=True,
        timeout=timeout,
        env=program_env(overrides),
    )
    text = r.stdout.decode("utf-8", "replace")
    if r.returncode == 0:
        check_taken(overrides, text, f"harness-{sampler}", vocab_path)
    out = text.splitlines()
    traces, finished = _parse(sampler, out, jobs)
    if r.returncode != 0 or not finished:
        code = r.returncode if r.returncode >= 0 else 128 - r.returncode
        said = "\n".join([*out, *r.stderr.decode("utf-8", "replace").splitlines()])
        raise RuntimeError(f"harness-{sampler} exited {code}: {crash_cause(said, code)}")
    return traces


def harness_tests(llg: str | None = None) -> frozenset[tuple[str, str]]:
    """The (test, sampler) pairs of llama.cpp's tests the harness built against llguidance `llg`
    runs itself (`harness --tests`); empty where it is not built or predates them."""
    exe = bin_dir(llg) / "harness"
    try:
        key = (str(exe), exe.stat().st_mtime_ns)
    except OSError:
        return frozenset()
    if key not in _TESTS:
        r = subprocess.run([str(exe), "--tests"], capture_output=True, text=True, timeout=60)
        pairs = [tuple(ln.split()) for ln in r.stdout.splitlines()] if r.returncode == 0 else []
        _TESTS[key] = frozenset((p[0], p[1]) for p in pairs if len(p) == 2)
    return _TESTS[key]


_TESTS: dict[tuple[str, int], frozenset[tuple[str, str]]] = {}


@dataclass
class Served:
    """What one `harness_serve` call brought back."""

    traces: dict[str, dict[str, Trace] | Exception]  # sampler -> its traces, or why it has none
    tests: dict[tuple[str, str], TestRun]  # (test, sampler) -> llama.cpp's test on it
    test_seconds: dict[tuple[str, str], float] = field(default_factory=dict)  # the harness's children's walls


def harness_serve(
    runs: dict[str, list[Job]],
    vocab_path: Path,
    tests: dict[str, tuple[str, ...]] | None = None,
    timeout: int = TEST_TIMEOUT,
    llg: str | None = None,
    overrides: tuple[Override, ...] = (),
) -> Served:
    """Each sampler's jobs (`runs`: sampler -> jobs, in that order), then llama.cpp's `tests`
    against it (sampler -> test names), through one harness process, which loads the vocab once
    for all of them and builds each sampler's tokenizer once, for its jobs and its tests alike
    (each test runs in a child the harness forks: an abort there ends that test only).

    Per sampler its traces, or the exception `harness` raises for it (RuntimeError,
    subprocess.TimeoutExpired); per test its `TestRun`, as `run_test` reads it. Where a sampler's
    part does not finish in the shared process (it died, timed out, or did not show an override
    taken), that sampler and every one after it run again each in a process of its own
    (`harness`), and each test not reported runs in its own binary (`run_test`), so each gets
    exactly the traces, the error or the run that a process of its own gives."""
    tests = tests or {}
    version = llg or venv_llguidance()
    linked = harness_tests(llg)
    serve = {s: tuple(t for t in tests.get(s, ()) if (t, s) in linked) for s in runs}
    call = _Call(runs, vocab_path, timeout, llg, overrides)
    out = Served({}, {}, {})
    names = list(runs)
    if len(names) > 1 or any(serve.values()):  # else its own process, below, is the same one process
        _serve_shared(call, serve, version, out)
    got, ran = out.traces, out.tests
    for s in names[len(got) :]:
        try:
            got[s] = harness(s, vocab_path, runs[s], timeout, llg, overrides)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            got[s] = e
    for s, ts in tests.items():
        for t in ts:
            if (t, s) not in ran:
                ran[t, s] = run_test(t, s, vocab_path, timeout, llg, overrides)
    return Served(got, {(t, s): ran[t, s] for s, ts in tests.items() for t in ts}, out.test_seconds)


@dataclass(frozen=True)
class _Call:
    """One `harness_serve` call: each sampler's jobs, the vocab, each run's time limit, the
    llguidance build (None: the venv's) and the key overrides every load takes."""

    runs: dict[str, list[Job]]
    vocab_path: Path
    timeout: int
    llg: str | None
    overrides: tuple[Override, ...]


def _serve_shared(call: _Call, serve: dict[str, tuple[str, ...]], version: str, out: Served) -> None:
    """Every sampler's jobs, then its tests of `serve`, in one harness process: into `out`, each
    sampler's traces (and its tests' runs) up to the first whose part did not finish."""
    names = list(call.runs)
    n_tests = sum(map(len, serve.values()))
    with tempfile.TemporaryDirectory(prefix="llgbridge-tests-") as tmp:
        lines = "".join(
            f"sampler {s}\n"
            + "".join(j.line() for j in call.runs[s])
            + "".join(f"test {t} {s} {call.timeout} {tmp.encode().hex()}\n" for t in serve[s])
            for s in names
        )
        try:
            r = subprocess.run(
                [str(bin_dir(call.llg) / "harness"), str(call.vocab_path)],
                input=lines.encode(),
                capture_output=True,
                timeout=call.timeout * (len(names) + n_tests),
                env=program_env(call.overrides),
            )
            text = r.stdout.decode("utf-8", "replace")
            if r.returncode == 0:
                check_taken(call.overrides, text, "harness", call.vocab_path)
            elif call.overrides:
                raise RuntimeError("the overrides are checked on a finished run")
            parts = _parts(text)
            for i, s in enumerate(names):
                # a part is whole once the next one began, or the process ended well
                if s not in parts or not (r.returncode == 0 or (i + 1 < len(names) and names[i + 1] in parts)):
                    break
                traces, finished = _parse(s, parts[s], call.runs[s])
                if not finished:
                    break
                out.traces[s] = traces
                _read_tests(parts[s], Path(tmp), version, call.timeout, out.tests, out.test_seconds)
        except (RuntimeError, subprocess.TimeoutExpired):
            pass


def _parts(text: str) -> dict[str, list[str]]:
    """The harness's output by sampler: each `@sampler NAME` line and the lines after it."""
    parts: dict[str, list[str]] = {}
    cur: list[str] = []
    for ln in text.splitlines():
        if ln.startswith("@sampler "):
            cur = parts[ln.removeprefix("@sampler ")] = []
        cur.append(ln)
    return parts


def _read_tests(
    part: list[str],
    tmp: Path,
    version: str,
    timeout: int,
    ran: dict[tuple[str, str], TestRun],
    secs: dict[tuple[str, str], float],
) -> None:
    """Each test a sampler's part of the harness's output reports (`@test`), read from its
    child's files into `ran`, its wall into `secs`; a child that could not start is left out."""
    for ln in part:
        if not ln.startswith("@test "):
            continue
        _, t, s, code, ns = ln.split(" ", 4)
        try:
            out, err = (
                Path(f"{tmp / f'{t}-{s}'}{x}").read_bytes().decode("utf-8", "replace") for x in (".out", ".err")
            )
        except OSError:
            continue
        run = read_test(t, s, int(code), out, err, version)
        ran[t, s] = timed_out(t, s, timeout, version) if run.exit_code == 124 else run
        secs[t, s] = int(ns) / 1e9


def harness_each(
    runs: dict[str, list[Job]],
    vocab_path: Path,
    timeout: int = TEST_TIMEOUT,
    llg: str | None = None,
    overrides: tuple[Override, ...] = (),
) -> dict[str, dict[str, Trace] | Exception]:
    """Each sampler's jobs through one harness process (`harness_serve` with no tests)."""
    return harness_serve(runs, vocab_path, None, timeout, llg, overrides).traces


def port_trace(bridge: Any, job: Job) -> Trace:
    """The same job through the Python port, with the sampler's policy (see the module's But:)."""
    from ...llg import mask_bits  # the runner and the build import this package: llguidance's library loads only here

    v = bridge.vocab
    stops = {v.eos, v.eot}
    t = Trace()
    try:
        m = bridge.new_matcher(job.grammar)
    except InputError as e:
        t.error = e.cause.removeprefix("llguidance rejected it: ")
        return t
    for i in range(10**6):
        try:
            allowed = np.flatnonzero(mask_bits(m.mask(), v.n_tokens))
        except LlgError as e:
            t.error, t.error_step = str(e), i
            t.allowed.append(bridge.after_mask_error())  # everything (the grammar dropped), or failing closed the end
            t.tokens.append(-1)
            return t
        nxt = -1
        if job.tokens is None:
            if i < job.max_steps and len(allowed) < v.n_tokens:
                nxt = next((int(a) for a in allowed if int(a) not in stops), -1)
        elif i < len(job.tokens):
            nxt = job.tokens[i]
        t.allowed.append(allowed)
        t.tokens.append(nxt)
        if nxt < 0:
            return t
        try:
            m.consume(nxt)
        except LlgError:
            pass  # as the sampler: the next mask reports it
    return t


# -- the differential ------------------------------------------------------------------------
N_EXAMPLES = 8


@dataclass(frozen=True)
class Difference:
    """One cell where the compiled sampler and the port disagree."""

    vocab: str
    sampler: str
    job: str
    step: int | None
    what: str  # "allowed", "error", "steps" or "greedy"
    only_cpp: tuple[int, ...] = ()  # up to N_EXAMPLES ids the C++ allows and the port does not
    only_port: tuple[int, ...] = ()
    n_only_cpp: int = 0
    n_only_port: int = 0
    cpp: str = ""  # for an error or a count: what each side said
    port: str = ""


@dataclass
class Differential:
    vocab: str
    sampler: str
    llguidance: str = ""  # what the compiled side linked; the port drives the venv's
    jobs: int = 0
    cells: int = 0
    differences: list[Difference] = field(default_factory=list)
    greedy_cpp: bool | None = None
    greedy_port: bool | None = None
    port_errors: dict[str, str] = field(
        default_factory=dict
    )  # job id -> the port's whole llguidance error (its state dump too)


def _allowed_difference(
    vocab: str, sampler: str, job: Job, step: int, a: np.ndarray, b: np.ndarray
) -> Difference | None:
    """The difference between the compiled (`a`) and the port's (`b`) allowed ids at one step, if any."""
    if len(a) == len(b) and np.array_equal(a, b):
        return None
    oc, op = np.setdiff1d(a, b), np.setdiff1d(b, a)
    return Difference(
        vocab,
        sampler,
        job.id,
        step,
        "allowed",
        tuple(int(x) for x in oc[:N_EXAMPLES]),
        tuple(int(x) for x in op[:N_EXAMPLES]),
        len(oc),
        len(op),
    )


def compare(vocab: str, sampler: str, job: Job, cpp: Trace, port: Trace, d: Differential) -> None:
    """Add one job's cells to `d`: each step up to the first error, then the error itself, with
    what the sampler allows at that step (everything where it drops the grammar, the
    end-of-generation tokens where it fails closed)."""
    d.jobs += 1
    end_c = len(cpp.allowed) if cpp.error_step is None else cpp.error_step
    end_p = len(port.allowed) if port.error_step is None else port.error_step
    if cpp.error and cpp.error_step is None:
        end_c = 0
    if port.error and port.error_step is None:
        end_p = 0
    steps = [(i, cpp.allowed[i], port.allowed[i]) for i in range(min(end_c, end_p))]
    d.cells += len(steps)
    if (
        end_c == end_p
        and cpp.error_step is not None
        and port.error_step is not None
        and end_c < len(cpp.allowed)
        and end_p < len(port.allowed)
    ):
        steps.append(
            (end_c, cpp.allowed[end_c], port.allowed[end_p])
        )  # the failed step: counted in the walk's end cell
    d.differences += [x for i, a, b in steps if (x := _allowed_difference(vocab, sampler, job, i, a, b)) is not None]
    d.cells += 1  # where and how the walk ended
    if end_c != end_p or first_line(cpp.error) != first_line(port.error):
        d.differences.append(
            Difference(
                vocab,
                sampler,
                job.id,
                min(end_c, end_p),
                "error" if cpp.error or port.error else "steps",
                cpp=f"step {cpp.error_step}: {first_line(cpp.error)}" if cpp.error else f"{end_c} steps",
                port=f"step {port.error_step}: {first_line(port.error)}" if port.error else f"{end_p} steps",
            )
        )


def special_text(vocab: Any) -> str:
    """The text of the vocab's end-of-turn token (EOT, else EOS), as `token_to_piece(special=true)`
    spells it, or "" when it has none or its text is not plain UTF-8."""
    for t in (vocab.eot, vocab.eos):
        if t >= 0:
            try:
                text = vocab.token_to_piece(t, special=True).decode("utf-8")
            except UnicodeDecodeError:
                continue
            if text.strip() and text.isprintable():
                return text
    return ""


# llama.cpp's own test-grammar-llguidance.cpp, "mixed quantifiers", with one of its passing strings: on
# the 256k vocabs its mask at step 1 exceeds llguidance's step_max_items ("Too many items"), bug D
MIXED_QUANTIFIERS = "start: cons+ vowel* cons? (vowel cons)*\nvowel: /[aeiouy]/\ncons: /[bcdfghjklmnpqrstvwxyz]/\n"
MIXED_STRING = b"bryyyy"


def special_literal(vocab: Any) -> str:
    """Bug C's literal: the end-of-turn token's text inside plain text, or "" (no such text)."""
    text = special_text(vocab)
    return f"say {text} now" if text else ""


def special_job(vocab: Any, max_steps: int = 64) -> Job | None:
    """Bug C's walk: the special literal, followed as the forced literal is."""
    literal = special_literal(vocab)
    return Job("special", literal_grammar(literal), None, max_steps) if literal else None


def jobs_for(
    truth: Any, literal: str, leak_grammar: str, walks: int = 2, seed: int = 0, max_steps: int = 64
) -> list[Job]:
    """The differential's jobs for one vocab (see the module docstring)."""
    from ... import soundness  # likewise: it loads llguidance

    jobs = [Job("leak", leak_grammar, ()), Job("forced", literal_grammar(literal), None, max_steps)]
    if (special := special_job(truth.vocab, max_steps)) is not None:
        jobs.append(special)  # bug C: the PR's sampler forces the control token, `nospecial` the text
    mixed = truth.tokenize(MIXED_STRING)
    if truth.vocab.real_bytes(mixed) == MIXED_STRING:
        jobs.append(Job("mixed", MIXED_QUANTIFIERS, tuple(mixed)))  # bug D: the PR drops the grammar, `failclosed` ends
    for name, grammar, k, sample in soundness.walk_list(truth, walks=walks, seed=seed):
        tokens = truth.tokenize(sample.encode())
        if truth.vocab.real_bytes(tokens) != sample.encode():
            continue  # soundness skips what the vocab cannot spell, and so does this
        jobs.append(Job(f"{name}.{k}", grammar, tuple(tokens)))
    return jobs


def port_traces(bridge: Any, jobs: list[Job]) -> dict[str, Trace]:
    """Every job through the port, by job id: what `differential` compares a compiled run with."""
    return {job.id: port_trace(bridge, job) for job in jobs}


def differential(
    bridge: Any, jobs: list[Job], traces: dict[str, Trace], llg: str = "", ports: dict[str, Trace] | None = None
) -> Differential:
    """The compiled `traces` against the port's walks of the same jobs. The port drives the venv's
    llguidance whichever version the compiled side linked, so one sampler's `ports` (`port_traces`)
    serve its runs on every version."""
    d = Differential(bridge.vocab.name, bridge.name, llg or venv_llguidance())
    ports = ports if ports is not None else port_traces(bridge, jobs)
    for job in jobs:
        port = ports[job.id]
        if port.error and port.error_step is not None:
            d.port_errors[job.id] = port.error
        compare(bridge.vocab.name, bridge.name, job, traces[job.id], port, d)
    # the fixed sampler says "not byte exact" once per vocab, when the first job builds its tokenizer
    d.greedy_cpp = any("not byte exact" in ln for ln in traces[jobs[0].id].log) if jobs else None
    d.greedy_port = bool(bridge.greedy)
    d.cells += 1
    if d.greedy_cpp != d.greedy_port:
        d.differences.append(
            Difference(
                d.vocab,
                d.sampler,
                jobs[0].id if jobs else "",
                None,
                "greedy",
                cpp=str(d.greedy_cpp),
                port=str(d.greedy_port),
            )
        )
    return d
