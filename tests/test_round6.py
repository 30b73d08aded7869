"""Issue 58, reliability round six: a result is the input it names and the bytes its run wrote, a
fault is never a measurement, a render is all or nothing, and the command line's mistakes are one
line before anything runs. One test (or more) per numbered break, named after it.

Results are computed here from the real fixtures, as their notebooks compute them; a run by hand
and llama-server are the real ones.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import vocab
from helpers import SPM

from llgbridge import batch, inputsets, nb, params, report, results, run
from llgbridge.analyses.census import compute as census
from llgbridge.errors import InputError
from llgbridge.inputs import Input
from llgbridge.paths import RESULTS, ROOT, vocab_path

GPT2 = vocab_path("gpt-2")
NO_GROUPS = "REAL_VOCABS= MATRIX_VOCABS= CORPUS_SAMPLE_VOCABS="


def _env(**extra: str) -> dict[str, str]:
    """This environment without the Make that may be running the tests, and with this library."""
    drop = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "INPUTS", "ANALYSES", "CUDA"}
    return {**{k: v for k, v in os.environ.items() if k not in drop}, "PYTHONPATH": str(ROOT / "lib"), **extra}


def _py(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, env=env or _env(), timeout=300, check=False
    )


def _census(res: Path, name: str, it: Input | None = None) -> Path:
    """`name`'s census result in `res`, as the census notebook writes it (its provenance, its
    digest), computed on `it`'s file (default the name's own)."""
    it = it or Input.make(name)
    payload = census.run_census(vocab(name) if it.registered else _vocab_of(it)).to_json()
    full = params.check("census", {"input": it.param(), "results_dir": str(res)})
    return nb.write_result(str(res), "census", name, payload, full)


def _vocab_of(it: Input) -> Any:
    from llgbridge.vocab import Vocab

    return Vocab(it.path, it.name)


# -- 1. a by-hand --file run lands in the main results under the name given ---------------------------
def test_1_a_file_other_than_the_names_own_is_a_setting() -> None:
    on_spm = params.check("census", {"input": Input.make("llama-spm", file=str(GPT2)).param()})
    assert params.changed("census", on_spm) == {"file": str(GPT2)}
    own = params.check("census", {"input": Input.make("llama-spm", file=str(SPM)).param()})
    assert params.changed("census", own) == {}


def test_1_a_result_of_another_file_is_stale_under_the_name_in_the_main_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gpt-2's census filed as llama-spm, its record agreeing with itself (the file it ran on, its
    sha256): current before, since `why_stale` rebuilt the expected input from that record."""
    res = tmp_path / "res"
    monkeypatch.setattr(results, "RESULTS", res)
    _census(res, "llama-spm", Input.make("llama-spm", file=str(GPT2)))
    r = json.loads((res / "census" / "llama-spm.json").read_text())
    assert r["summary"]["n_tokens"] == 50257  # gpt-2's figures under llama-spm's name
    why = results.why_stale(res, "census", r)
    assert why.startswith(
        "it was made from data/vocabs/ggml-vocab-gpt-2.gguf, not from data/vocabs/ggml-vocab-llama-spm.gguf"
    ), why
    assert batch.out_of_date("census", "llama-spm", res) == why
    ok, [f] = results.load(res, "census")
    assert not ok and f["error"] == f"stale result: {why}; make report reruns it"


@pytest.mark.slow
def test_1_the_by_hand_file_run_goes_to_byhand_and_leaves_no_main_result(tmp_path: Path) -> None:
    """`run census llama-spm --file …gpt-2.gguf` wrote data/results/census/llama-spm.json with
    gpt-2's figures; `run census x --file a-fifo` left a failed main result every report named."""
    main = RESULTS / "census" / "llama-spm.json"
    before = main.read_bytes() if main.exists() else None
    done = _py("-m", "llgbridge.run", "census", "llama-spm", "--file", str(GPT2.relative_to(ROOT)))
    assert done.returncode == 0, done.stderr
    assert "the result goes to data/byhand" in done.stdout, done.stdout
    assert (main.read_bytes() if main.exists() else None) == before
    byhand = json.loads((results.BYHAND / "census" / "llama-spm.json").read_text())
    assert byhand["summary"]["n_tokens"] == 50257
    fifo = tmp_path / "a-fifo.gguf"
    os.mkfifo(fifo)
    done = _py("-m", "llgbridge.run", "census", "x-round6", "--file", str(fifo))
    assert done.returncode != 0
    assert not (RESULTS / "census" / "x-round6.json").exists()
    (results.BYHAND / "census" / "x-round6.json").unlink(missing_ok=True)


# -- 3. a mistyped input name deletes the committed report ------------------------------------------------
MISTYPED = f"VOCABS=llama-spn {NO_GROUPS}"
SAID = "INPUTS VOCABS: no such input: llama-spn (did you mean llama-spm?); nothing was run"


def test_3_a_mistyped_input_is_refused_in_one_line_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(InputError) as e:
        inputsets.parse(MISTYPED)
    assert str(e.value) == SAID
    done = _py("-m", "llgbridge.batch", "--groups", MISTYPED, "--results", str(tmp_path / "res"))
    assert (done.returncode, done.stderr.splitlines()) == (2, [SAID]), done.stdout
    done = _py("-m", "llgbridge.inputsets", "--make-models", "--groups", MISTYPED)
    assert (done.returncode, done.stderr.splitlines()) == (2, [SAID])
    assert not (tmp_path / "res").exists()


def test_3_make_report_with_a_mistyped_input_stops_naming_it() -> None:
    """`make -n report` (what runs nothing but the plan) with the issue's INPUTS: the plan refuses."""
    done = subprocess.run(
        ["make", "-n", "report", f"INPUTS={MISTYPED}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    assert SAID in done.stderr.splitlines(), done.stderr


def test_3_a_failed_result_is_failed_even_where_its_input_is_not_there(tmp_path: Path) -> None:
    """`results.load` took a failed run on a name no input holds for "its input is gone" and left it
    out: the report saw no failure, and published an empty report as complete."""
    res = tmp_path / "res"
    missing = "data/vocabs/ggml-vocab-llama-spn.gguf"
    st: run.RunStatus = {
        "notebook": "census",
        "vocab": "llama-spn",
        "status": "failed",
        "error": f"InputError: {missing}: no such file",
    }
    run.write_failed(res / "census" / "llama-spn.json", st, {"inputs": [{"path": missing, "sha256": None}]})
    ok, failed = results.load(res, "census")
    assert ok == [] and [f["vocab"] for f in failed] == ["llama-spn"]
    assert results.dropped(res) == []


def _snapshot(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_3_a_render_that_cannot_write_a_file_leaves_the_report_as_it_was(tmp_path: Path) -> None:
    """The rule "a render is all or nothing": the second render (one more input) cannot write its
    last file; every table it wrote before that was in place, beside the old pages."""
    res, out = tmp_path / "res", tmp_path / "out"
    _census(res, "llama-spm")
    report.write_report(res, out)
    _census(res, "gpt-2")
    blocked = out / "vocab" / "gpt-2.html"  # the last file the render writes, in the order it commits them
    blocked.mkdir(parents=True)
    (blocked / "keep").write_text("a folder where the render wants a file")
    before = _snapshot(out)
    code = report.main(["--results", str(res), "--out", str(out)])
    assert code == 1
    after = _snapshot(out)
    assert after == before, sorted(k for k in {*before, *after} if before.get(k) != after.get(k))
    assert not list(out.glob(".render-*"))  # nothing of the new render left behind either


def test_3_the_render_names_the_file_it_could_not_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res, out = tmp_path / "res", tmp_path / "out"
    _census(res, "llama-spm")
    (out / "tables" / "census.csv").mkdir(parents=True)
    assert report.main(["--results", str(res), "--out", str(out)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert [ln for ln in err if ln.startswith("report: ")] == [
        f"report: {out / 'tables' / 'census.csv'}: Is a directory; nothing in {out} was changed"
    ], err
    assert not (out / "index.html").exists()


# -- 10. INPUTS naming a group twice ----------------------------------------------------------------
def test_10_a_group_given_twice_is_refused_in_one_line(tmp_path: Path) -> None:
    twice = f"VOCABS=llama-spm VOCABS=gpt-2 {NO_GROUPS}"
    with pytest.raises(InputError) as e:
        inputsets.parse(twice)
    assert str(e.value) == "INPUTS: VOCABS is given twice; give each group once; nothing was run"
    done = _py("-m", "llgbridge.batch", "--groups", twice, "--results", str(tmp_path / "res"))
    assert (done.returncode, len(done.stderr.splitlines())) == (2, 1), done.stderr


# -- 11. NaN and Infinity, and an HTTP 500, as measurements ---------------------------------------------
@pytest.mark.parametrize("typed", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_11_a_number_llama_cpps_json_cannot_read_is_refused(typed: str) -> None:
    given = params.parse_value(typed)
    with pytest.raises(InputError) as e:
        params.check("server", {"temperature": given})
    assert str(e.value).startswith("parameter temperature: "), e.value
    assert "\n" not in str(e.value)
    with pytest.raises(InputError, match="element 0 must be a finite number"):
        params.check_value("x", [float("nan")], [0.0])


def test_11_a_run_by_hand_with_nan_is_refused_before_anything_runs(tmp_path: Path) -> None:
    done = _py("-m", "llgbridge.run", "server", "llama-spm", "-p", "temperature", "NaN", "--results", str(tmp_path))
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("[server] llama-spm: parameter temperature: "), done.stderr
    assert not list(tmp_path.rglob("*.json"))


def test_11_a_5xx_or_a_parse_error_of_the_request_is_a_fault_and_a_refusal_is_an_answer() -> None:
    from llgbridge.analyses.server.causes import request_fault

    said = "[json.exception.parse_error.101] parse error at line 1, column 80: syntax error"
    assert request_fault(500, said).startswith("the server could not parse the request itself (HTTP 500")
    assert request_fault(503, "busy").startswith("the server failed on the request (HTTP 503")
    assert request_fault(400, "Failed to initialize samplers: std::exception") == ""
    assert request_fault(200, "") == ""


def test_11_a_server_that_answers_every_request_with_http_500_measured_nothing(tmp_path: Path) -> None:
    """The real llama-server asked with `"temperature": NaN` (what params let through before):
    every request answered HTTP 500, each an "error" row, and the page said none broke."""
    from llgbridge import generation as G
    from llgbridge import synth
    from llgbridge.analyses.server import compute as server
    from llgbridge.analyses.server import llama_server as S
    from llgbridge.vocab import Vocab

    if why := S.built()[1]:
        pytest.skip(f"servers not built: {why}")
    model = synth.make_model(SPM, tmp_path / "spm.gguf")
    cases = ["forced_literal", "dots"]
    run_ = server.ServerRun(
        S.binary("fixed", S.LLG_PINNED), model, Vocab(model, model.stem), True, S.LLG_PINNED, "fixed", cases,
        {c: G.PLAIN for c in cases}, tmp_path / "fixed.log", 16, 0, float("nan"),
    )  # fmt: skip
    with pytest.raises(server.ServerFault) as e:
        server.run_cases(run_)
    msg = str(e.value)
    assert "\n" not in msg and "case 'forced_literal': the server could not parse the request itself" in msg, msg
    assert "nothing was measured" in msg


# -- 12. a hand-edited result is published ------------------------------------------------------------------
def test_12_a_hand_edited_result_is_stale_and_the_plan_reruns_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    res = tmp_path / "res"
    monkeypatch.setattr(results, "RESULTS", res)
    p = _census(res, "gpt-2")
    assert batch.out_of_date("census", "gpt-2", res) == ""
    r = json.loads(p.read_text())
    r["summary"]["differing"] = r["summary"]["lost_leading_space"] = 4242
    p.write_text(json.dumps(r, indent=1))
    why = batch.out_of_date("census", "gpt-2", res)
    assert why.startswith("its content changed since its run wrote it"), why
    ok, [f] = results.load(res, "census")
    assert not ok and f["error"] == f"stale result: {why}; make report reruns it"
    # what `make -n report` runs: the plan says it would run it again, and why
    done = _py(
        "-m", "llgbridge.batch", "--inputs", "every=gpt-2", "--analyses", "census", "--results", str(res),
        env=_env(MAKEFLAGS="n"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"[gpt-2] census ({why})" in done.stdout.splitlines(), done.stdout
    # the run's own values laid out otherwise (another indent, the keys in another order) are its content
    fresh = json.loads(_census(tmp_path / "fresh", "gpt-2").read_text())
    p.write_text(json.dumps(dict(reversed(fresh.items()))))
    assert batch.out_of_date("census", "gpt-2", res) == ""


# -- 13. a checkout whose path has a space --------------------------------------------------------------------
def test_13_the_venv_stamp_is_one_word_in_a_checkout_whose_path_has_a_space(tmp_path: Path) -> None:
    """In `…/fresh co/llgbridge` the stamp was two targets, and `touch $@` left `co~llgbridge` in
    the checkout (`git status`: `?? co~llgbridge`)."""
    tree = tmp_path / "fresh co" / "llgbridge"
    tree.mkdir(parents=True)
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy2(ROOT / name, tree / name)
    (tree / "lib").symlink_to(ROOT / "lib")
    env = {k: v for k, v in _env().items() if k != "PYTHONPATH"}

    def make(*args: str) -> str:
        done = subprocess.run(
            ["make", "--no-print-directory", "PYTHON=false", *args],
            cwd=tree,
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        return done.stdout

    said = make("--eval", 'print-stamp: ; @echo "[$(STAMP)]"', "print-stamp").strip()
    assert said.startswith("[.venv/.installed-cuda0") and " " not in said, said
    touched = [ln.split(" ", 1)[1] for ln in make("-n", "setup").splitlines() if ln.startswith("touch ")]
    assert touched and all(t.startswith(".venv/") and " " not in t for t in touched), touched


# -- met on the way: a misspelled analysis, a grammar llguidance refuses --------------------------------------
def test_a_misspelled_analysis_is_one_line_with_the_name_it_is_close_to(tmp_path: Path) -> None:
    done = _py("-m", "llgbridge.run", "laek", "llama-spm", "--results", str(tmp_path))
    assert done.returncode != 0 and "Traceback" not in done.stderr
    [line] = [ln for ln in (done.stdout + done.stderr).splitlines() if ln.strip()]
    assert "no such notebook; did you mean leak?" in line, line


def test_a_grammar_llguidance_refuses_is_refused_before_a_kernel_starts(tmp_path: Path) -> None:
    """It passed the parameters' check and failed inside the notebook, a kernel's start later."""
    done = _py("-m", "llgbridge.run", "leak", "llama-spm", "-p", "grammar", "start: /[a-z/", "--results", str(tmp_path))
    said = done.stdout + done.stderr
    assert done.returncode == 2 and "Traceback" not in said, said
    assert said.strip() == (
        '[leak] llama-spm: parameter grammar: llguidance rejects it: at 1(8): invalid regex "[a-z" (in regex): '
        "regex parse error: error: unclosed character class"
    ), said
    assert not (tmp_path / "leak").exists()  # nothing ran, so no result, not even a failed one


def test_a_run_from_empty_results_says_no_result_yet_once_not_once_per_input(tmp_path: Path) -> None:
    args = ("-m", "llgbridge.batch", "--inputs", "every=llama-spm gpt-2", "--analyses", "census")
    done = _py(*args, "--results", str(tmp_path / "res"), "--workers", "1")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "[2 inputs] no result yet, so each of their analyses runs: llama-spm, gpt-2", lines
    assert not any(ln.endswith("(no result yet)") for ln in lines), lines
    # `make -n report` asks what would run and why: it still gets every input's line
    dry = _py(*args, "--results", str(tmp_path / "dry"), env=_env(MAKEFLAGS="n"))
    assert dry.stdout.splitlines() == ["[llama-spm] census (no result yet)", "[gpt-2] census (no result yet)"]


def test_a_mistyped_input_in_a_notebook_run_in_jupyter_is_one_line() -> None:
    """The census notebook as JupyterLab runs it, its input mistyped: 41 lines of traceback were shown."""
    import nbformat
    from nbclient import NotebookClient

    book = nbformat.read(ROOT / "notebooks" / "census.ipynb", as_version=4)
    cell = next(c for c in book.cells if "parameters" in c.metadata.get("tags", []))
    cell.source += '\ninput = "llama-sppm"'
    NotebookClient(book, kernel_name="python3", allow_errors=True, timeout=300, cwd=str(ROOT / "notebooks")).execute()
    # the first error (allow_errors runs the later cells too, each failing on the first's absence)
    error = next(o for c in book.cells for o in c.get("outputs", []) if o.get("output_type") == "error")
    assert error["traceback"] == ["InputError: data/vocabs/ggml-vocab-llama-sppm.gguf: no such file"], error


def test_a_worker_gives_back_the_memory_bound_it_set(tmp_path: Path) -> None:
    """A Worker bounds its process's address space so that its kernels inherit the bound; the
    process goes on after it (pytest's worker, a what-if's), so it gives the bound back: Chromium,
    started later by the page tests in the same pytest worker, died of SIGTRAP under 16 GiB."""
    import resource

    from llgbridge.run import Worker

    before = resource.getrlimit(resource.RLIMIT_AS)
    with Worker(tmp_path / "out", tmp_path / "res", progress=False):
        inside = resource.getrlimit(resource.RLIMIT_AS)
    assert inside[0] != resource.RLIM_INFINITY  # the kernels' bound was set
    assert resource.getrlimit(resource.RLIMIT_AS) == before
    # one that cannot start (its output folder under a file), as test_hostile's test_7 makes one
    blocked = tmp_path / "file"
    blocked.write_text("a file where a folder should be")
    with pytest.raises(NotADirectoryError), Worker(blocked / "out", tmp_path / "res", progress=False):
        pass
    assert resource.getrlimit(resource.RLIMIT_AS) == before
