"""The product: llama-server, shipped and patched, asked over HTTP on loopback (guide 5.1, 8).

Expectations come from the guide: bug B's silent drop is "HTTP 200, no error field" with the
matcher's `forced bytes: got ' '` error in the log (5.1), the fixed sampler logs "not byte exact"
and falls back to greedy tokenization on SentencePiece (5.3), bug A lets a space into a
grammar that forbids one on BPE (4.4: `' ...'`), guide table 7 on the build that links llguidance
1.0.1. The servers are built by `make test` (`make server`); where they cannot be built, every test
here is skipped with the build's one-line reason. The tests that only ask share one server per
(build, model) for the module (`served`; requests go one at a time and ask for no prompt cache, so
each answer is its own, and each reads only its own request's lines of the log). Every server
these tests start is stopped, and after the last test none is left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from conftest import variant, vocab

from llgbridge import cases as C
from llgbridge import generate as R
from llgbridge import generation as G
from llgbridge import guide, synth
from llgbridge.analyses.native import compute as native
from llgbridge.analyses.server import cases as server_cases
from llgbridge.analyses.server import compute as server
from llgbridge.analyses.server import judge as server_judge
from llgbridge.analyses.server import llama_server as S
from llgbridge.modelfile import ModelFile
from llgbridge.vocab import Vocab

_status, _why = S.built()
pytestmark = pytest.mark.skipif(bool(_why), reason=f"servers not built: {_why}")
PIN = native.LLG_PINNED


def _model(name: str) -> tuple[Path, Vocab]:
    path = synth.ensure_model(name)
    return path, Vocab(path, name)


Served = Callable[[str, str], tuple[S.Server, Path, Vocab]]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`served(sampler, name)`: the build's server on `name`'s synthetic model, started the first
    time a test asks for it and kept for the module's other tests; all stopped at its end."""
    logs = tmp_path_factory.mktemp("servers")
    started: dict[tuple[str, str], tuple[S.Server, Path, Vocab]] = {}
    with ExitStack() as stack:

        def get(sampler: str, name: str) -> tuple[S.Server, Path, Vocab]:
            if (sampler, name) not in started:
                path, v = _model(name)
                srv = stack.enter_context(S.serve(S.binary(sampler, PIN), path, logs / f"{sampler}-{name}.log"))
                started[sampler, name] = (srv, path, v)
            return started[sampler, name]

        yield get


def _run(srv: S.Server, path: Path, v: Vocab, sampler: str, cases: list[str]) -> server.ServerRun:
    """`cases` on `srv`'s build as the suite asks them: the plain prompt, 64 tokens, seed 0, temperature 0."""
    return server.ServerRun(
        srv.binary, path, v, True, PIN, sampler, cases, {c: G.PLAIN for c in cases}, srv.log_path, 64, 0, 0.0
    )


def _ask(served: Served, sampler: str, name: str, case: str) -> tuple[server.ServerRow, str]:
    """One case through one build: the judged row and the server's log while it answered."""
    srv, path, v = served(sampler, name)
    start = srv.log_size()
    row = server.ask(srv, _run(srv, path, v, sampler, [case]), case)
    return row, srv.log(start)  # `ask` waited for the request's lines


@pytest.mark.guards("bug B")
def test_upstream_server_drops_the_grammar_silently_on_spm(served: Served) -> None:
    """Guide 5.1: HTTP 200, no error field, an `llg error` in the log only, and output the
    one-literal grammar forbids (the forced ' hello' is the wrong token, then free text)."""
    row, log = _ask(served, variant("upstream"), "llama-spm", "forced_literal")
    assert (row.http_status, row.error_field) == (200, False)
    assert "llg error: Parser Error:" in log and "forced bytes: got ' '" in log
    assert row.outcome == "violation"
    assert row.output.startswith(" hello")  # the space llama_tokenize prepends (guide 5.1)


@pytest.mark.guards("bug B")
def test_fixed_server_keeps_the_literal_on_spm(served: Served) -> None:
    """Guide 5.3: the fixed sampler falls back to greedy tokenization, and the output is the literal.
    The server says "not byte exact" once, at its first grammar, so its whole log is read for it."""
    row, log = _ask(served, variant("fixed"), "llama-spm", "forced_literal")
    assert "tokenizer is not byte exact" in served(variant("fixed"), "llama-spm")[0].log()
    assert "llg error" not in log
    assert (row.http_status, row.outcome, row.output) == (200, "pass", C.FORCED_LITERAL)


@pytest.mark.guards("bug A")
def test_upstream_server_lets_a_space_into_the_dots_on_bpe(served: Served) -> None:
    """Guide 4.4 through the product: llama-bpe's ' ...' (clean_spaces) passes a grammar of dots
    only; HTTP 200, no error field, no llg error: nothing but the bytes says so."""
    row, log = _ask(served, variant("upstream"), "llama-bpe", "dots")
    assert (row.http_status, row.error_field, row.llg_errors) == (200, False, 0)
    assert row.outcome == "violation" and " " in row.output


@pytest.mark.guards("bug A")
def test_fixed_server_json_schema_passes_on_bpe(served: Served) -> None:
    """The JSON case through `json_schema` (the server's own schema-to-grammar), and the dots case,
    pass on the fixed build."""
    for case in ("json_enum", "dots"):
        row, _ = _ask(served, variant("fixed"), "llama-bpe", case)
        assert (row.http_status, row.error_field, row.outcome) == (200, False, "pass"), case
        assert " " not in row.output


@pytest.mark.parametrize("name", ["llama-spm", "llama-bpe"])
def test_the_port_and_the_server_agree(name: str, tmp_path: Path) -> None:
    """The port's matrix (generate, in llama-cpp-python's own loop) and the server, case by case
    on both samplers: the same outcome and the same tokens up to the first violation."""
    path, v = _model(name)
    llm = G.load_model(ModelFile.read(path), n_threads=1)
    cases = list(C.CASES)
    rows, tokens = [], []
    from conftest import bridge

    for s in S.SAMPLERS:
        for c in cases:
            r = R.run_case(llm, path.name, v, True, bridge(name, s), C.CASES[c])
            rows.append(r.row())
            tokens.append(r.tokens)
    matrix = {"rows": rows, "tokens": tokens}
    served_rows = []
    for s in S.SAMPLERS:
        got, _ = server.run_cases(
            server.ServerRun(
                S.binary(s, S.venv_llguidance()),
                path,
                v,
                True,
                S.venv_llguidance(),
                s,
                cases,
                {c: G.PLAIN for c in cases},
                tmp_path / f"{s}.log",
                64,
                0,
                0.0,
            )
        )
        served_rows += got
    served = {
        "rows": [r.row() for r in served_rows],
        "tokens": [r.tokens for r in served_rows],
        "port_llguidance": S.venv_llguidance(),
    }
    cells = server_judge.differential(matrix, served)
    assert len(cells) == len(cases) * len(S.SAMPLERS)
    assert [c for c in cells if not c.same] == []


def test_the_pinned_build_reproduces_guide_table_7() -> None:
    """Guide 7.1 on the binaries that link llguidance 1.0.1, as llama.cpp does."""
    if PIN not in native.built_versions():
        pytest.skip(f"not built against llguidance {PIN}")
    for name, ((up_code, up_bad), (fx_code, fx_bad)) in guide.UNIT.items():
        up = native.run_test("pr", "upstream", vocab(name).path, llg=PIN)
        fx = native.run_test("pr", "fixed", vocab(name).path, llg=PIN)
        assert (up.exit_code, up.space_bad, up.llguidance) == (up_code, up_bad, PIN), name
        assert (fx.exit_code, fx.space_bad) == (fx_code, fx_bad), name


def test_a_model_the_server_cannot_load_is_one_line(tmp_path: Path) -> None:
    """A vocab-only file has no weights: the server exits, and the error names it with its log's last lines."""
    with pytest.raises(S.ServerError) as e:
        with S.serve(S.binary("fixed", PIN), vocab("gpt-2").path, tmp_path / "x.log", startup_timeout=60):
            pass
    msg = str(e.value)
    assert "\n" not in msg and "ggml-vocab-gpt-2.gguf" in msg and "exited" in msg


def test_a_request_that_times_out_is_no_answer(tmp_path: Path) -> None:
    path, _ = _model("llama-spm")
    with S.serve(S.binary("fixed", PIN), path, tmp_path / "t.log") as srv:
        r = S.post(
            srv,
            "/completion",
            {"prompt": "Output:", "n_predict": 4096, "temperature": 0, "ignore_eos": True},
            timeout=0.001,
        )
        assert r.status == 0 and "no answer" in r.text
        assert srv.alive()


@pytest.mark.parametrize("sampler", S.SAMPLERS)
def test_a_schema_llguidance_cannot_compile_is_ignored_with_http_200(sampler: str, served: Served) -> None:
    """Beyond the PR, on both builds: llama_sampler_llg_new logs llguidance's error and returns no
    matcher (common/llguidance.cpp:25-30), so the request runs unconstrained and answers HTTP 200
    with no error field; llguidance's own message is in the log only."""
    row, log = _ask(served, sampler, "llama-spm", server.REJECTED_CASE)
    assert (row.http_status, row.error_field, row.outcome) == (200, False, "ignored")
    assert "llg error:" in log and "failed to compile JSON schema" in row.error


def test_bug_c_a_special_token_spelled_in_a_literal_ends_the_turn_on_the_fixed_server(served: Served) -> None:
    """Beyond the PR: `say <|eot_id|> now` on llama-bpe. `tokenize_fn` parses special-token text, so
    after `say` and `' '` the forced token is 128009 (<|eot_id|>, the end of turn) and the server
    stops there: HTTP 200, no error field, stop_type eos, content 'say ' (checked by hand in the
    compiled harness and the server)."""
    _, v = _model("llama-bpe")
    assert native.special_text(v) == "<|eot_id|>"
    row, _ = _ask(served, "fixed", "llama-bpe", server.SPECIAL_CASE)
    assert (row.http_status, row.error_field, row.stop_type, row.output) == (200, False, "eos", "say ")
    assert row.tokens == [37890, 220]  # 'say', ' ': the turn ended on the forced <|eot_id|>
    spm, _ = _ask(served, "fixed", "llama-spm", server.SPECIAL_CASE)
    assert (spm.outcome, spm.output) == ("pass", "say </s> now")  # greedy: llguidance spells the text out


def test_bug_c_by_a_json_schema_pattern_on_the_fixed_server_and_nospecial_repairs_it(served: Served) -> None:
    """Bug C by another road: a `json_schema` string whose `pattern` spells the end-of-turn token
    (`^<\\|eot_id\\|>x$` on llama-bpe). The server's own schema-to-grammar forces the string's bytes,
    `tokenize_fn` parses them into the control token, and the answer is `"` with stop_type eos and
    HTTP 200 (checked by hand with curl); candidate 0004 (`nospecial`) spells the text out."""
    row, _ = _ask(served, variant("fixed"), "llama-bpe", server.SPECIAL_PATTERN_CASE)
    assert (row.http_status, row.error_field, row.stop_type, row.output, row.outcome) == (
        200,
        False,
        "eos",
        '"',
        "violation",
    )
    assert row.content_match == "same"  # the server's own content says so too
    fixed, _ = _ask(served, variant("nospecial"), "llama-bpe", server.SPECIAL_PATTERN_CASE)
    assert (fixed.outcome, fixed.output) == ("pass", '"<|eot_id|>x"')


@pytest.mark.guards("bug B: the PR gives byte forcing up on SentencePiece")
def test_the_ownbridge_server_forces_the_literal_on_spm_and_spells_the_special_text_on_bpe(served: Served) -> None:
    """Candidate 0007 (llguidance's own bridge in common/llguidance.cpp) on the server: on llama-spm
    the forced literal comes out in two tokens with its tokenize_fn kept behind the sentinel byte (no
    "not byte exact" fallback, where the PR's server takes greedy), and on llama-bpe bug C's literal is
    spelled as text, as `nospecial` spells it."""
    spm, _ = _ask(served, variant("ownbridge"), "llama-spm", "forced_literal")
    assert (spm.outcome, spm.output, spm.greedy, len(spm.tokens)) == ("pass", "hello world", False, 2)
    bpe, _ = _ask(served, "ownbridge", "llama-bpe", server.SPECIAL_CASE)
    assert (bpe.outcome, bpe.output) == ("pass", "say <|eot_id|> now")


# -- the product's own words: every judged answer against the server's `content` -----------------
def test_every_judged_answer_is_the_servers_own_content(served: Served) -> None:
    """The judge decodes an answer from the tokens the server returns; the server says what it
    produced in `content`. On every case of both builds, on a SentencePiece and a BPE vocab, the
    two are one text (`server_judge.CONTENT_RULES`: pieces joined with special=false, so the
    end-of-turn token that ended bug C's answer adds nothing)."""
    for name in ("llama-spm", "llama-bpe"):
        for sampler in S.SAMPLERS:
            rows = [_ask(served, sampler, name, c)[0] for c in [*C.CASES, server.SPECIAL_CASE]]
            assert [(r.case, r.content_match) for r in rows if r.content_match != "same"] == [], (name, sampler)
            assert all(r.outcome != server.DISAGREES for r in rows)


def test_the_chat_endpoints_message_is_part_of_its_own_tokens(served: Served) -> None:
    """The chat endpoint gives its tokens only with their probabilities (`logprobs`); its message is
    what the chat parser keeps of their text (`CONTENT_RULES["chat"]`: on llama-bpe the whitespace the
    model wrote before the JSON is dropped), never text the tokens do not hold."""
    row, _ = _ask(served, "fixed", "llama-bpe", server.CHAT_CASE)
    assert (row.http_status, row.outcome, row.content_match) == (200, "pass", "same after chat")
    assert row.tokens and row.output.startswith("{") and not row.output.startswith(" ")


def test_replayed_answers_judged_from_threads_are_the_servers_content(served: Served) -> None:
    """The load test's false finding, caught by the product's own words: real answers, judged again
    and again from 8 threads with Python's switch interval forced down (as a loaded machine
    interrupts a thread now and then). Every judgement is the server's `content`. When `Vocab` kept
    one piece buffer per object, 16 of these 280 judgements differed from the content ("differs at
    byte 268: judge '}:ntn environ…', server 'från environ…'") and were counted as violations."""
    from concurrent.futures import ThreadPoolExecutor

    srv, path, v = served("upstream", "llama-spm")
    cases = [*C.CASES, server_cases.GBNF_CASE, ""]
    run = _run(srv, path, v, "upstream", [c for c in cases if c])
    replies = [(run.asks[c], S.post(srv, run.asks[c].endpoint, run.asks[c].body)) for c in cases]

    def judged(a: tuple[server_cases.Ask, S.Reply]) -> str:
        return server.answered(srv, run, a[0], a[1], [], False).content_match

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            got = list(pool.map(judged, replies * 40))
    finally:
        sys.setswitchinterval(old)
    assert sorted(set(got)) == ["same"]


def test_a_judge_that_reads_other_bytes_disagrees_with_the_server(served: Served) -> None:
    """The cross-check itself: the server's content against bytes that are not its tokens' (as a
    corrupted judge would read them) is a disagreement naming the first differing byte, and the row
    is counted neither as a pass nor as a violation; invalid UTF-8 the server replaced is not."""
    srv, path, v = served("fixed", "llama-spm")
    run = _run(srv, path, v, "fixed", ["forced_literal"])
    asked = run.asks["forced_literal"]
    reply = S.post(srv, asked.endpoint, asked.body)
    good = server.answered(srv, run, asked, reply, [], False)
    assert (good.outcome, good.output, good.content_match) == ("pass", "hello world", "same")
    assert reply.body is not None
    reply.body["content"] = "hello workd"  # one byte of another piece, as the shared buffer gave it
    bad = server.answered(srv, run, asked, reply, [], False)
    assert bad.outcome == server.DISAGREES
    assert bad.content_match == "differs at byte 9: judge 'ld', server 'kd'"
    # <0xE4> alone is not UTF-8: the server's JSON carries U+FFFD for it (nlohmann's replace)
    e4 = [next(t for t in range(v.n_tokens) if v.token_to_piece(t) == b"\xe4")]  # the byte token <0xE4>
    assert v.real_bytes(e4) == b"\xe4"
    assert server_judge.content_match(v, e4, "\ufffd") == "same after utf8"
    assert server_judge.content_match(v, e4, "").startswith("differs at byte 0")


# -- the server answering is ours, its log is kept, its health is asked safely --------------------
def test_a_server_that_cannot_bind_is_never_taken_for_the_one_started(tmp_path: Path) -> None:
    """A stolen port: with another llama-server already listening, the one started there could not
    bind and died, but the first `/health` reached the other and answered 200, and every row was
    recorded as this build's with the other's outputs. The server now binds a port of its own and
    names it in its log, and /props must name its model: here it is told the other's port, dies,
    and is reported as dead, never as answering."""
    spm, _ = _model("llama-spm")
    bpe, _ = _model("llama-bpe")
    with S.serve(S.binary("upstream", PIN), spm, tmp_path / "other.log") as other:
        with pytest.raises(S.ServerError) as e:
            with S.serve(S.binary("fixed", PIN), bpe, tmp_path / "ours.log", extra=("--port", str(other.port))):
                pass
        assert "exited" in str(e.value) and "couldn't bind" in str(e.value)
        with S.serve(S.binary("fixed", PIN), bpe, tmp_path / "ours.log") as ours:
            assert ours.port != other.port
            assert S.http_status(ours.base + "/health", 5) == 200
            assert Path(S._get_json(ours.base + "/props", 5)["model_path"]).resolve() == bpe.resolve()


@pytest.mark.parametrize("kind", ["full disk", "cannot open"])
def test_a_log_that_cannot_be_written_fails_its_rows_in_one_line(tmp_path: Path, kind: str) -> None:
    """A full disk under the server's logs: the server's own writes failed without a word, and the
    rows the log feeds changed (upstream's llg_errors 1 -> 0) while the run said ok. /dev/full
    stands for the full disk, a folder in the log's place for a file that cannot be opened: every
    row fails, naming the log, in the same words. (The full disk once gave two messages, as the
    reader thread's first write failed before or after the start-up looked: CI saw the other.)"""
    path, v = _model("llama-spm")
    log = tmp_path / "full.log"
    if kind == "full disk":
        log.symlink_to("/dev/full")
        reason = "No space left on device"
    else:
        log.mkdir()
        reason = "Is a directory"
    rows, _ = server.run_cases(
        server.ServerRun(
            S.binary("upstream", PIN),
            path,
            v,
            True,
            PIN,
            "upstream",
            ["forced_literal", "dots"],
            {"forced_literal": G.PLAIN, "dots": G.PLAIN},
            log,
            64,
            0,
            0.0,
        )
    )
    assert [r.outcome for r in rows] == ["error", "error"]
    want = f"the server's log could not be written ({log}: {reason}): the rows it feeds are not recorded"
    assert [r.error for r in rows] == [want, want]


def _stat(proc: Path) -> list[str]:
    """The fields of `proc`/stat after the command name (state, ppid, ...): the name is in
    parentheses and may hold spaces, so split after its last ")"."""
    return (proc / "stat").read_text().rsplit(")", 1)[1].split()


def _wait_stopped(pid: int) -> None:
    """SIGSTOP takes effect when each thread next leaves the kernel, not when kill() returns: in
    that window the server's HTTP thread still answered /health (CI saw True). Wait until every
    thread of `pid` is in state T."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        states = {_stat(t)[0] for t in Path(f"/proc/{pid}/task").iterdir()}
        if states <= {"T", "t"}:
            return
        time.sleep(0.01)
    raise AssertionError(f"server {pid} did not stop within 10 s of SIGSTOP")


def test_a_stopped_server_is_unhealthy_not_an_exception(tmp_path: Path) -> None:
    """The health check after the load test, on a server that stopped answering (SIGSTOP): a
    TimeoutError escaped it, the run lost every row it had collected for the input, and the runner
    called it "a cell ran past the per-input time limit". Now it is one False."""
    path, _ = _model("llama-spm")
    with S.serve(S.binary("fixed", PIN), path, tmp_path / "s.log") as srv:
        os.kill(srv.proc.pid, signal.SIGSTOP)
        try:
            _wait_stopped(srv.proc.pid)
            t0 = time.monotonic()
            assert S.answers_health(srv, 1.0) is False
            assert time.monotonic() - t0 < 10
        finally:
            os.kill(srv.proc.pid, signal.SIGCONT)


def _servers(parent: int | None = None) -> list[int]:
    """Pids of every running process whose executable is one of the built servers (started by
    `parent`, when given: another run's servers on the same machine are not this one's)."""
    ours = {str(b.resolve()) for b in S.builds()}
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if os.readlink(d / "exe") in ours and (parent is None or int(_stat(d)[1]) == parent):
                    out.append(int(d.name))
            except (OSError, ValueError, IndexError):
                continue
    return out


@pytest.fixture(scope="module", autouse=True)
def _no_server_outlives_the_tests() -> Iterator[None]:
    """After every test of this module, whichever ran: no server this process started is left."""
    yield
    assert _servers(os.getpid()) == []


def test_a_killed_parent_takes_its_server_with_it(tmp_path: Path) -> None:
    """`make report` interrupted hard (SIGKILL, no finally runs): the server dies with the process
    that started it (PR_SET_PDEATHSIG), so none is left behind."""
    path, _ = _model("llama-spm")
    ready = tmp_path / "ready"
    script = (
        "from pathlib import Path\nfrom llgbridge.analyses.server import llama_server as S\nimport time\n"
        f"with S.serve(S.binary('fixed', "
        f"{PIN!r}), Path({str(path)!r}), Path({str(tmp_path / 'k.log')!r})) as srv:\n    "
        f"Path({str(ready)!r}).write_text(str(srv.proc.pid))\n    time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 120
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        pid = int(ready.read_text())
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        for _ in range(100):
            if not Path(f"/proc/{pid}").exists() or pid not in _servers():
                break
            time.sleep(0.1)
        assert pid not in _servers()
    finally:
        parent.kill()
