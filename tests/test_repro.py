"""The repro commands the page and the PR comment print answer what they say they answer.

Each command is taken from `report.repro` (the page prints these very objects) and its run-time
part is run against the binaries the suite builds: `./build/bin/test-grammar-llguidance` becomes the
PR's test compiled against the fixed or the upstream sampler (llguidance as llama.cpp pins it), the
`llama-server` line runs the suite's server build with the same flags on the same model, and the
`curl` line is run as printed, on the port the server got. What each must answer comes from the
results, never from this file: results the real analyses make for the session (`made_results`:
llama-spm, bugs A and B), so a fresh clone runs every test here.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import tempfile
import time
import urllib.request
from functools import cache
from pathlib import Path

import pytest

from llgbridge.analyses.native import compute as native
from llgbridge.analyses.server import llama_server as S
from llgbridge.paths import REPORTS, VOCABS
from llgbridge.report import PageData, repro

_native_why = native.unavailable()
_status, _server_why = S.built()
# the inputs of the page's repro lines (`repro.unit_repros`, `server_repros`) the session's results hold
UNIT_VOCABS = ("llama-spm",)
SERVER_VOCABS = ("llama-spm",)


@pytest.fixture(scope="module")
def res(made_results: Path) -> PageData:
    return PageData(made_results)


@pytest.fixture(scope="module")
def units(res: PageData) -> list[repro.UnitRepro]:
    got = repro.unit_repros(res)
    assert {u.vocab for u in got} >= set(UNIT_VOCABS), got
    return got


@pytest.fixture(scope="module")
def servers(res: PageData) -> list[repro.ServerRepro]:
    got = repro.server_repros(res)
    assert {s.vocab for s in got} == set(SERVER_VOCABS), got
    return got


@cache
def _run_unit(command: str, sampler: str) -> int:
    """The printed command with the suite's binary and fixture in place of the checkout's: what
    `; echo $?` prints. Run once per (command, sampler): the page's unit lines and the comment's
    print the same commands for the same vocabs, and the binary's exit is the same each time."""
    exe = native.bin_dir(native.LLG_PINNED) / f"test-pr-{sampler}"
    line = command.replace(repro.TEST_EXE, shlex.quote(str(exe))).replace("models/", shlex.quote(str(VOCABS)) + "/")
    # the test writes debug files into its working directory when a string fails
    out = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=600, cwd=tempfile.gettempdir())
    return int(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(_native_why is not None, reason=f"native parts not built: {_native_why}")
@pytest.mark.parametrize("vocab", UNIT_VOCABS)
def test_the_unit_command_exits_as_the_page_says(vocab: str, units: list[repro.UnitRepro]) -> None:
    """Guide 8's unit level: the PR's test on the vocab, with the fix and with
    `common/llguidance.cpp` reverted."""
    for unit in (u for u in units if u.vocab == vocab):
        assert _run_unit(unit.command, "fixed") == unit.with_
        assert _run_unit(unit.command, "upstream") == unit.without


def _start(s: repro.ServerRepro, sampler: str, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    """The printed server command line with the suite's build and model, on a port the server binds
    itself (`--port 0`) and names in its log, as `server.serve` starts it: never another server's."""
    argv = shlex.split(
        s.server_command(exe=str(S.binary(sampler, S.LLG_PINNED)), model=str(S.DATA / "models" / s.model))
    )
    return _serve(argv, log)


def _serve(argv: list[str], log: Path) -> tuple[subprocess.Popen[bytes], int]:
    """`argv` started on a port the server binds itself (`--port 0`) and names in its log, once it
    answers /health; the process and its port."""
    argv[argv.index("--port") + 1] = "0"
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=S._die_with_parent,
    )
    deadline = time.monotonic() + S.STARTUP_TIMEOUT
    port = 0
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-2000:]
        if not port:
            m = S.LISTENING.search(log.read_bytes())
            port = int(m.group(1)) if m else 0
        try:
            if port:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        return proc, port
        except OSError:
            pass
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    raise AssertionError(f"no /health within {S.STARTUP_TIMEOUT} s: {log.read_text()[-2000:]}")


def _curl(s: repro.ServerRepro, port: int) -> tuple[int, dict]:
    """The printed curl request, as printed, on `port`; the status comes from curl's -w."""
    out = subprocess.run(
        [*shlex.split(s.curl(port)), "-w", "\n%{http_code}"], capture_output=True, text=True, timeout=300
    )
    body, status = out.stdout.rsplit("\n", 1)
    return int(status), json.loads(body)


@pytest.mark.skipif(bool(_server_why), reason=f"servers not built: {_server_why}")
@pytest.mark.parametrize("sampler", ["upstream", "fixed"])
def test_the_server_commands_answer_as_the_page_says(
    sampler: str, servers: list[repro.ServerRepro], tmp_path: Path
) -> None:
    """Every server finding: its request answers, on the build without the fix and with it, the
    HTTP status, error field, content and stop type the page prints."""
    got = {}
    for model in dict.fromkeys(s.model for s in servers):
        mine = [s for s in servers if s.model == model]
        proc, port = _start(mine[0], sampler, tmp_path / f"{sampler}-{model}.log")
        try:
            for s in mine:
                got[s.case, s.vocab] = _curl(s, port)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    for s in servers:
        want = s.without if sampler == "upstream" else s.with_
        status, body = got[s.case, s.vocab]
        assert (status, "error" in body, body.get("stop_type")) == (
            want.http_status,
            want.error_field,
            want.stop_type,
        ), s.finding
        assert body["content"].startswith(want.content), (s.finding, body["content"][:80])


def test_the_committed_page_prints_these_commands(
    units: list[repro.UnitRepro], servers: list[repro.ServerRepro]
) -> None:
    """The report's Markdown holds each command as `repro` writes it from results made afresh, so
    what the tests run is what a maintainer reads."""
    md = (REPORTS / "pr-review-tables.md").read_text(encoding="utf-8")
    comment = (REPORTS / "pr-comment.md").read_text(encoding="utf-8")
    for u in units:
        assert u.command in md and u.command in comment
    for s in servers:
        assert s.server_command() in md and s.curl() in md


# the comment's own lines (`reports/claims.json`'s repro claim, what `pr-comment.md` prints): committed,
# so these run on a fresh clone, where no `data/results` exists
PASTE = next((c["values"] for c in json.loads((REPORTS / "claims.json").read_text()) if c["key"] == "repro"), None)


@pytest.mark.skipif(_native_why is not None, reason=f"native parts not built: {_native_why}")
@pytest.mark.skipif(not PASTE, reason="the comment prints no repro")
def test_the_comments_unit_lines_exit_as_it_says() -> None:
    """Each `test-grammar-llguidance` line of the comment, with the PR's sampler and with the
    base's bridge, exits as its comment says."""
    assert PASTE is not None
    for u in PASTE["units"]:
        assert _run_unit(u["command"], "fixed") == u["with_"], u["command"]
        assert _run_unit(u["command"], "upstream") == u["without"], u["command"]


def _paste_start(line: str, sampler: str, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    """The comment's server line with the suite's build and model file in place of the checkout's."""
    argv = shlex.split(line)
    argv[0] = str(S.binary(sampler, S.LLG_PINNED))
    argv[argv.index("-m") + 1] = str(S.DATA / "models" / argv[argv.index("-m") + 1])
    return _serve(argv, log)


@pytest.mark.skipif(bool(_server_why), reason=f"servers not built: {_server_why}")
@pytest.mark.skipif(not (PASTE and PASTE["server"]), reason="the comment prints no server lines")
@pytest.mark.parametrize("sampler", ["upstream", "fixed"])
def test_the_comments_server_lines_answer_as_it_says(sampler: str, tmp_path: Path) -> None:
    """The comment's llama-server line on the public model, then each curl line as printed: HTTP
    200, no error field, and the server's own `content` matching the grammar's regex exactly where
    the comment says it does (with the PR: the fixed build; without it: upstream)."""
    assert PASTE is not None and PASTE["server"]
    s = PASTE["server"]
    if not (S.DATA / "models" / s["file"]).is_file():
        pytest.skip(f"{s['file']} not fetched (make models)")
    proc, port = _paste_start(s["server"], sampler, tmp_path / "server.log")
    try:
        for c in s["checks"]:
            line = repro.PasteCheck(**c).curl().replace(f"localhost:{repro.PORT}", f"127.0.0.1:{port}")
            out = subprocess.run(
                [*shlex.split(line), "-w", "\n%{http_code}"], capture_output=True, text=True, timeout=300
            )
            body, status = out.stdout.rsplit("\n", 1)
            answer = json.loads(body)
            want = c["with_"] if sampler == "fixed" else c["without"]
            assert (int(status), "error" in answer) == (200, False), c["case"]
            assert (re.fullmatch(c["regex"], answer["content"]) is not None) == want, (c["case"], answer["content"])
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.mark.skipif(not PASTE, reason="the comment prints no repro")
def test_the_comment_prints_the_lines_these_tests_run() -> None:
    assert PASTE is not None
    comment = (REPORTS / "pr-comment.md").read_text(encoding="utf-8")
    for u in PASTE["units"]:
        assert u["command"] in comment
    if PASTE["server"]:
        assert PASTE["server"]["server"] in comment
        for c in PASTE["server"]["checks"]:
            assert repro.PasteCheck(**c).curl() in comment
