"""The product: llama-server, shipped and patched, asked over HTTP on loopback (guide 5.1, 8).

Expectations come from the guide: bug B's silent drop is "HTTP 200, no error field" with the
matcher's `forced bytes: got ' '` error in the log (5.1), the fixed sampler logs "not byte exact"
and falls back to greedy tokenization on SentencePiece (5.3), bug A lets a space into a
grammar that forbids one on BPE (4.4: `' ...'`), guide table 7 on the build that links llguidance
1.0.1. The servers are built by `make test` (`make server`); where they cannot be built, every test
here is skipped with the build's one-line reason. Every server these tests start is stopped, and
the last test checks that none is left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import variant, vocab

from llgbridge import generate as G
from llgbridge import guide, native, serving, synth
from llgbridge import server as S
from llgbridge.vocab import Vocab

_status, _why = S.built()
pytestmark = pytest.mark.skipif(bool(_why), reason=f"servers not built: {_why}")
PIN = native.LLG_PINNED


def _model(name: str) -> tuple[Path, Vocab]:
    path = synth.ensure_model(name)
    return path, Vocab(path, name)


def _ask(sampler: str, name: str, case: str, tmp_path: Path, llg: str = PIN) -> tuple[serving.ServerRow, str]:
    """One case through one build: the judged row and the server's whole log."""
    path, v = _model(name)
    log = tmp_path / f"{sampler}-{name}.log"
    with S.serve(S.binary(sampler, llg), path, log) as srv:
        row = serving.ask(srv, v, path.name, True, llg, sampler, case, G.PLAIN, 64, 0, 0.0)
        return row, srv.log()


@pytest.mark.guards("bug B")
def test_upstream_server_drops_the_grammar_silently_on_spm(tmp_path: Path) -> None:
    """Guide 5.1: HTTP 200, no error field, an `llg error` in the log only, and output the
    one-literal grammar forbids (the forced ' hello' is the wrong token, then free text)."""
    row, log = _ask(variant("upstream"), "llama-spm", "forced_literal", tmp_path)
    assert (row.http_status, row.error_field) == (200, False)
    assert "llg error: Parser Error:" in log and "forced bytes: got ' '" in log
    assert row.outcome == "violation"
    assert row.output.startswith(" hello")  # the space llama_tokenize prepends (guide 5.1)


@pytest.mark.guards("bug B")
def test_fixed_server_keeps_the_literal_on_spm(tmp_path: Path) -> None:
    """Guide 5.3: the fixed sampler falls back to greedy tokenization, and the output is the literal."""
    row, log = _ask(variant("fixed"), "llama-spm", "forced_literal", tmp_path)
    assert "tokenizer is not byte exact" in log and "llg error" not in log
    assert (row.http_status, row.outcome, row.output) == (200, "pass", G.FORCED_LITERAL)


@pytest.mark.guards("bug A")
def test_upstream_server_lets_a_space_into_the_dots_on_bpe(tmp_path: Path) -> None:
    """Guide 4.4 through the product: llama-bpe's ' ...' (clean_spaces) passes a grammar of dots
    only; HTTP 200, no error field, no llg error: nothing but the bytes says so."""
    row, log = _ask(variant("upstream"), "llama-bpe", "dots", tmp_path)
    assert (row.http_status, row.error_field, row.llg_errors) == (200, False, 0)
    assert row.outcome == "violation" and " " in row.output


@pytest.mark.guards("bug A")
def test_fixed_server_json_schema_passes_on_bpe(tmp_path: Path) -> None:
    """The JSON case through `json_schema` (the server's own schema-to-grammar), and the dots case,
    pass on the fixed build."""
    for case in ("json_enum", "dots"):
        row, _ = _ask(variant("fixed"), "llama-bpe", case, tmp_path)
        assert (row.http_status, row.error_field, row.outcome) == (200, False, "pass"), case
        assert " " not in row.output


@pytest.mark.parametrize("name", ["llama-spm", "llama-bpe"])
def test_the_port_and_the_server_agree(name: str, tmp_path: Path) -> None:
    """The port's matrix (generate, in llama-cpp-python's own loop) and the server, case by case
    on both samplers: the same outcome and the same tokens up to the first violation."""
    path, v = _model(name)
    llm = G.load_model(path, n_threads=1)
    cases = list(G.CASES)
    rows, tokens = [], []
    from conftest import bridge

    for s in S.SAMPLERS:
        for c in cases:
            r = G.run_case(llm, path.name, v, True, bridge(name, s), G.CASES[c])
            rows.append(r.row())
            tokens.append(r.tokens)
    matrix = {"rows": rows, "tokens": tokens}
    served_rows = []
    for s in S.SAMPLERS:
        got, _ = serving.run_build(S.binary(s, S.venv_llguidance()), path, v, True, S.venv_llguidance(), s, cases,
                                   {c: G.PLAIN for c in cases}, tmp_path / f"{s}.log", 64, 0, 0.0)
        served_rows += got
    served = {"rows": [r.row() for r in served_rows], "tokens": [r.tokens for r in served_rows],
              "port_llguidance": S.venv_llguidance()}
    cells = serving.differential(matrix, served)
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
        r = S.post(srv, "/completion", {"prompt": "Output:", "n_predict": 4096, "temperature": 0, "ignore_eos": True}, timeout=0.001)
        assert r.status == 0 and "no answer" in r.text
        assert srv.alive()


@pytest.mark.parametrize("sampler", S.SAMPLERS)
def test_a_schema_llguidance_cannot_compile_is_ignored_with_http_200(sampler: str, tmp_path: Path) -> None:
    """Beyond the PR, on both builds: llama_sampler_llg_new logs llguidance's error and returns no
    matcher (common/llguidance.cpp:25-30), so the request runs unconstrained and answers HTTP 200
    with no error field; llguidance's own message is in the log only."""
    row, log = _ask(sampler, "llama-spm", serving.REJECTED_CASE, tmp_path)
    assert (row.http_status, row.error_field, row.outcome) == (200, False, "ignored")
    assert "llg error:" in log and "failed to compile JSON schema" in row.error


def test_bug_c_a_special_token_spelled_in_a_literal_ends_the_turn_on_the_fixed_server(tmp_path: Path) -> None:
    """Beyond the PR: `say <|eot_id|> now` on llama-bpe. `tokenize_fn` parses special-token text, so
    after `say` and `' '` the forced token is 128009 (<|eot_id|>, the end of turn) and the server
    stops there: HTTP 200, no error field, stop_type eos, content 'say ' (checked by hand in the
    compiled harness and the server)."""
    _, v = _model("llama-bpe")
    assert serving.special_text(v) == "<|eot_id|>"
    row, _ = _ask("fixed", "llama-bpe", serving.SPECIAL_CASE, tmp_path)
    assert (row.http_status, row.error_field, row.stop_type, row.output) == (200, False, "eos", "say ")
    assert row.tokens == [37890, 220]  # 'say', ' ': the turn ended on the forced <|eot_id|>
    spm, _ = _ask("fixed", "llama-spm", serving.SPECIAL_CASE, tmp_path)
    assert (spm.outcome, spm.output) == ("pass", "say </s> now")  # greedy: llguidance spells the text out


def _servers() -> list[int]:
    """Pids of every running process whose executable is one of the built servers."""
    ours = {str(b.resolve()) for b in S.builds()}
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if os.readlink(d / "exe") in ours:
                    out.append(int(d.name))
            except OSError:
                continue
    return out


def test_a_killed_parent_takes_its_server_with_it(tmp_path: Path) -> None:
    """`make report` interrupted hard (SIGKILL, no finally runs): the server dies with the process
    that started it (PR_SET_PDEATHSIG), so none is left behind."""
    path, _ = _model("llama-spm")
    ready = tmp_path / "ready"
    script = (f"from pathlib import Path\nfrom llgbridge import server as S\nimport time\n"
              f"with S.serve(S.binary('fixed', {PIN!r}), Path({str(path)!r}), Path({str(tmp_path / 'k.log')!r})) as srv:\n"
              f"    Path({str(ready)!r}).write_text(str(srv.proc.pid))\n    time.sleep(600)\n")
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


def test_zz_no_server_outlives_the_tests() -> None:
    """Runs last in this module (pytest keeps file order): every server started above is gone."""
    assert _servers() == []
