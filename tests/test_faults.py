"""Issue 48, "a fault is never a finding" (breaks 1, 2, 3, 11, 12, 14, 15), and issue 49's rule
that a run which could not make a whole part never replaces the committed report with a weaker one.

Each test writes its hostile input itself: a fixture copy cut to 100,000 bytes in a copy of the
tree, a result that records another llguidance, a llama-server killed by its pid while it answers,
a user's file in a symlinked tables folder, a SIGTERM to a running pool.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import vocab
from helpers import CENSUS_ONLY, census_needs_no_models

from llgbridge import batch, nb, report, results, synth
from llgbridge import generation as G
from llgbridge.analyses.census import compute as census
from llgbridge.analyses.server import compute as server
from llgbridge.analyses.server import llama_server as S
from llgbridge.measure import regen
from llgbridge.modelfile import ModelFile
from llgbridge.paths import VOCABS, vocab_path
from llgbridge.report.pages import BANNER_END
from llgbridge.vocab import Vocab


def _tree(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A copy of the tree (`regen.tree_copy`, the venv shared) with llama-spm as its one fixture
    and no native build, models or schemas: `make report` there writes only its own data/ and reports/."""
    tree = regen.tree_copy(tmp_path)
    for link in (tree / "data").iterdir():
        link.unlink()
    manifest = tree / "lib" / "llgbridge" / "vocabs.sha256"
    manifest.write_text("".join(ln + "\n" for ln in manifest.read_text().splitlines() if "llama-spm" in ln))
    vocabs = tree / "data" / "vocabs"
    vocabs.mkdir(parents=True)
    (vocabs / "ggml-vocab-llama-spm.gguf").symlink_to(VOCABS / "ggml-vocab-llama-spm.gguf")
    (vocabs / ".complete").touch()
    for built in ("native", "native/server"):  # the census needs neither
        (tree / "data" / built).mkdir(parents=True)
        (tree / "data" / built / ".built").touch()
    census_needs_no_models(tree)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "KEEP_GOING")}
    env["PYTHONPATH"] = str(tree / "lib")  # before the venv's editable path to the real tree
    return tree, env


def _make(tree: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "-s", "report", *CENSUS_ONLY, *extra],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _said(r: subprocess.CompletedProcess[str]) -> str:
    return r.stdout[-3000:] + r.stderr[-3000:]


def _first_screen(reports: Path) -> str:
    """What index.html says before its title: the banner, where there is one."""
    return (reports / "index.html").read_text().split("<h1>", 1)[0]


# -- break 1: a failing input leaves the old page up and make report exits 0 -------------------------
@pytest.mark.slow
def test_1_a_truncated_input_fails_make_report_and_is_named_on_the_first_screen(tmp_path: Path) -> None:
    tree, env = _tree(tmp_path)
    cut = tree / "data" / "vocabs" / "ggml-vocab-cut.gguf"
    shutil.copy(vocab_path("gpt-2"), cut)
    reports = tree / "reports"
    first = _make(tree, env)
    assert first.returncode == 0, _said(first)
    assert "census,cut,ok," in (reports / "tables" / "inputs.csv").read_text()
    assert (reports / "vocab" / "cut.html").exists()
    # the input replaced by a bad file: the same name, cut to 100,000 bytes
    cut.write_bytes(cut.read_bytes()[:100_000])
    second = _make(tree, env)
    assert second.returncode != 0, _said(second)
    failed = json.loads((reports / "run.json").read_text())["failed"]
    assert [(f["notebook"], f["vocab"]) for f in failed] == [("census", "cut")], failed
    screen = _first_screen(reports)
    assert "This report is incomplete" in screen and "cut (census)" in screen, screen
    assert "truncated" in screen.lower(), screen
    # its old figures are gone, not shown as current
    assert ",cut," not in (reports / "tables" / "census.csv").read_text()
    assert not (reports / "vocab" / "cut.html").exists()
    # KEEP_GOING=1 keeps exit status 0; the page still says it
    kept = _make(tree, env, "KEEP_GOING=1")
    assert kept.returncode == 0, _said(kept)
    assert "cut (census)" in _first_screen(reports)


# -- issue 49: a run that could not make a whole part leaves the last complete report -----------------
def _files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_49_a_part_no_input_could_make_leaves_the_last_complete_report(tmp_path: Path) -> None:
    res, out = tmp_path / "results", tmp_path / "out"
    for name in ("llama-spm", "gpt-2"):
        nb.write_result(str(res), "census", name, census.run_census(vocab(name)).to_json())
    assert report.write_report(res, out, keep_parts=True) == []
    before = _files(out)
    why = "native build refused: 'native/Makefile' has a space in it"
    for name in ("llama-spm", "gpt-2"):  # every input of the part failed, as when its build cannot start
        (res / "census" / f"{name}.json").write_text(
            json.dumps({"status": "failed", "notebook": "census", "vocab": name, "error": why})
        )
    failed = report.write_report(res, out, keep_parts=True)
    assert {(f["notebook"], f["vocab"]) for f in failed} == {("census", "llama-spm"), ("census", "gpt-2")}
    after = _files(out)
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert changed == {"index.html", "run.json"}, changed  # every table and page as it was
    page, old = after["index.html"].decode(), before["index.html"].decode()
    assert page.split(BANNER_END)[1] == old.split(BANNER_END)[1]
    screen = page.split("<h1>", 1)[0]
    assert "the last complete report" in screen and "could not make census" in screen, screen
    assert "gpt-2, llama-spm (census): native build refused:" in screen and "has a space in it" in screen, screen
    assert json.loads(after["run.json"])["kept"] == ["census"]
    # the next complete run draws the page again, without the banner
    for name in ("llama-spm", "gpt-2"):
        nb.write_result(str(res), "census", name, census.run_census(vocab(name)).to_json())
    assert report.write_report(res, out, keep_parts=True) == []
    assert _files(out)["index.html"] == before["index.html"]


# -- break 2: results record the versions they were computed with ----------------------------------
def test_2_a_result_of_another_llguidance_is_replanned_and_the_page_reads_versions_from_results(
    tmp_path: Path,
) -> None:
    res = tmp_path / "results"
    params = {"input": "llama-spm", "results_dir": str(res)}
    nb.write_result(str(res), "census", "llama-spm", census.run_census(vocab("llama-spm")).to_json(), params)
    now = results.run_versions()
    recorded = json.loads((res / "census" / "llama-spm.json").read_text())["provenance"]["versions"]
    assert recorded == now and set(now) == {"llguidance", "llama-cpp-python", "gguf", "llama.cpp", "patches"}
    assert batch.out_of_date("census", "llama-spm", res) == ""
    report.write_report(res, tmp_path / "out")
    assert json.loads((tmp_path / "out" / "run.json").read_text())["versions"]["llguidance"] == now["llguidance"]
    # the same result, as if computed on another llguidance (a pip install since): replanned, and
    # the page no longer says it ran on the installed version
    p = res / "census" / "llama-spm.json"
    r = json.loads(p.read_text())
    r["provenance"]["versions"]["llguidance"] = "1.0.1" if now["llguidance"] != "1.0.1" else "1.9.1"
    p.write_text(json.dumps(r))
    why = batch.out_of_date("census", "llama-spm", res)
    assert f"it was made with llguidance {r['provenance']['versions']['llguidance']}" in why, why
    failed = report.write_report(res, tmp_path / "again")
    assert [f["error"] for f in failed] == [f"stale result: {why}; make report reruns it"]
    said = json.loads((tmp_path / "again" / "run.json").read_text())["versions"]
    assert said["llguidance"] == "not recorded", said
    assert f"llguidance {now['llguidance']}" not in (tmp_path / "again" / "index.html").read_text()


# -- break 3: a server killed mid-run is a fault, never the build's answer ---------------------------
def _server_pids() -> list[int]:
    """The built servers this process started."""
    ours = {str(b.resolve()) for b in S.builds()}
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
                if ppid == os.getpid() and os.readlink(d / "exe") in ours:
                    out.append(int(d.name))
            except (OSError, ValueError, IndexError):
                continue
    return out


def _killer(logs: list[Path], killed: list[int]) -> threading.Thread:
    """SIGKILL, by its pid, the server writing each of `logs` in turn, once a request reached its slot."""

    def run() -> None:
        deadline = time.monotonic() + 120
        for log in logs:
            while time.monotonic() < deadline:
                pids = _server_pids() if log.exists() and S.SLOT_STARTED in log.read_text(errors="replace") else []
                if pids:
                    os.kill(pids[0], signal.SIGKILL)
                    killed.append(pids[0])
                    break
                time.sleep(0.002)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _build_run(tmp_path: Path, log: str) -> tuple[list[server.ServerRow], float]:
    """Three cases through the fixed build on llama-spm's synthetic model, one server (or two)."""
    path = synth.ensure_model("llama-spm")
    cases = ["forced_literal", "json_enum", "dots"]
    llg = S.venv_llguidance()
    return server.run_cases(
        server.ServerRun(
            S.binary("fixed", llg),
            path,
            Vocab(path, "llama-spm"),
            True,
            llg,
            "fixed",
            cases,
            {c: G.PLAIN for c in cases},
            tmp_path / log,
            64,
            0,
            0.0,
        )
    )


@pytest.mark.skipif(bool(S.built()[1]), reason=f"servers not built: {S.built()[1]}")
def test_3_a_server_killed_mid_run_is_asked_again_then_failed_never_recorded(tmp_path: Path) -> None:
    calm, _ = _build_run(tmp_path, "calm.log")
    killed: list[int] = []
    t = _killer([tmp_path / "once.log"], killed)
    rows, _ = _build_run(tmp_path, "once.log")
    t.join(5)
    assert len(killed) == 1
    # killed once: every case asked again of a fresh server, and answered as an undisturbed one answers
    assert [r.outcome for r in rows] == [r.outcome for r in calm], [r.row() for r in rows]
    assert [r.tokens for r in rows] == [r.tokens for r in calm]
    assert (tmp_path / "once-retry.log").exists()
    # killed twice: the run fails, naming the build, the model, the case and what the log says
    killed.clear()
    t = _killer([tmp_path / "twice.log", tmp_path / "twice-retry.log"], killed)
    with pytest.raises(server.ServerFault) as e:
        _build_run(tmp_path, "twice.log")
    t.join(5)
    msg = str(e.value)
    assert len(killed) == 2 and "\n" not in msg, msg
    assert f"llama-server-fixed-{S.venv_llguidance()}" in msg and "synthetic-llama-spm.gguf" in msg, msg
    assert "no answer at case '" in msg and "the server exited (" in msg, msg
    assert "its log twice-retry.log" in msg and "again from a fresh server" in msg, msg
    assert _server_pids() == []


# -- break 12: what the page shows is decided by the results and inputs present, every time ----------
@pytest.mark.slow
def test_12_a_result_written_elsewhere_is_published_and_a_removed_input_leaves_the_page(tmp_path: Path) -> None:
    tree, env = _tree(tmp_path)
    reports = tree / "reports"
    first = _make(tree, env)
    assert first.returncode == 0, _said(first)
    # a vocab dropped in, its result written by another process (a leftover worker, a by-hand run):
    # the pool has nothing left to run for it
    mine = tree / "data" / "vocabs" / "ggml-vocab-mine.gguf"
    shutil.copy(vocab_path("gpt-2"), mine)
    by_hand = subprocess.run(
        [str(tree / ".venv" / "bin" / "python"), "-m", "llgbridge.run", "census", "mine"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert by_hand.returncode == 0, _said(by_hand)
    again = _make(tree, env)
    assert again.returncode == 0, _said(again)
    assert "census,mine,ok," in (reports / "tables" / "inputs.csv").read_text()
    assert 'href="vocab/mine.html"' in (reports / "index.html").read_text()
    assert (reports / "vocab" / "mine.html").exists()
    # the vocab removed from data/vocabs/: it leaves the page, inputs.csv and its own page
    mine.unlink()
    gone = _make(tree, env)
    assert gone.returncode == 0, _said(gone)
    assert ",mine," not in (reports / "tables" / "inputs.csv").read_text()
    assert "vocab/mine.html" not in (reports / "index.html").read_text()
    assert not (reports / "vocab" / "mine.html").exists()


# -- break 14: every setting on a page comes from the result ----------------------------------------
@pytest.mark.skipif(bool(S.built()[1]), reason=f"servers not built: {S.built()[1]}")
def test_14_the_server_section_says_the_temperature_and_seed_its_results_record(tmp_path: Path) -> None:
    path = synth.ensure_model("llama-spm")
    settings = {"temperature": 0.8, "seed": 3, "max_tokens": 16, "n_gpu_layers": 0, "parallel": 4}
    run = server.run(
        "llama-spm",
        ModelFile.read(path),
        True,
        None,
        ["forced_literal"],
        server.RunOptions(
            samplers=("fixed",), temperature=0.8, seed=3, max_tokens=16, candidates=(), log_dir=tmp_path / "logs"
        ),
        say=lambda s: None,
    )
    res = tmp_path / "results"
    nb.write_result(str(res), "server", "llama-spm", server.payload(path, run, settings))
    sec = report.server_section(res)
    assert sec is not None
    assert "at temperature 0.8 with seed 3, at most 16 tokens" in sec.more, sec.more
    assert "temperature 0 " not in sec.more


# -- break 15: the render removes only what a render wrote --------------------------------------------
def test_15_a_render_never_removes_a_file_it_did_not_write(tmp_path: Path) -> None:
    notes = tmp_path / "my-tables"
    notes.mkdir()
    (notes / "my-notes.csv").write_text("mine,yes\n1,2\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "tables").symlink_to(notes)  # reports/tables a link to a folder of the user's
    res = tmp_path / "results"
    failed = {"status": "failed", "notebook": "census", "vocab": "x", "error": "InputError: x: no such file"}
    (res / "census").mkdir(parents=True)
    (res / "census" / "x.json").write_text(json.dumps(failed))
    report.write_report(res, out)
    assert (notes / "my-notes.csv").read_text() == "mine,yes\n1,2\n"
    assert (notes / "inputs.csv").exists()  # this render's, through the link
    # the next render writes no inputs.csv: the one a render wrote goes, the user's file stays
    (res / "census" / "x.json").unlink()
    report.write_report(res, out)
    assert not (notes / "inputs.csv").exists()
    assert (notes / "my-notes.csv").read_text() == "mine,yes\n1,2\n"
    # a file a render wrote and the user changed since is left, and said
    (res / "census" / "x.json").write_text(json.dumps(failed))
    report.write_report(res, out)
    (notes / "inputs.csv").write_text("edited by hand\n")
    (res / "census" / "x.json").unlink()
    report.write_report(res, out)
    assert (notes / "inputs.csv").read_text() == "edited by hand\n"


# -- break 11: a stopped run keeps working after the command has returned ----------------------------
def _running_in(tree: Path) -> list[str]:
    """Every process whose working folder is `tree` (make's workers, their kernels and servers)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                if Path(os.readlink(d / "cwd")).is_relative_to(tree):
                    cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ")[:120]
                    out.append(f"{d.name}: {cmd!r}")
            except (OSError, ValueError):
                continue
    return out


def _written(folder: Path) -> dict[str, int]:
    return {str(p): p.stat().st_ctime_ns for p in folder.rglob("*") if p.is_file()} if folder.exists() else {}


@pytest.mark.slow
def test_11_a_sigterm_to_make_report_ends_its_workers_first_and_nothing_is_written_after(tmp_path: Path) -> None:
    tree, env = _tree(tmp_path)
    shutil.copy(vocab_path("gpt-2"), tree / "data" / "vocabs" / "ggml-vocab-two.gguf")
    analyses = "ANALYSES=census probe leak forced exactness soundness"
    make = subprocess.Popen(
        ["make", "report", *CENSUS_ONLY, analyses],
        cwd=tree,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, as `timeout` gives the command it runs
    )
    try:
        assert make.stdout is not None
        seen = []
        for line in make.stdout:
            seen.append(line)
            if "(1/12)" in line:
                break
        else:
            pytest.fail("".join(seen)[-3000:])
        os.killpg(make.pid, signal.SIGTERM)  # what `timeout`, a closed terminal or a cancelled CI job sends
        rest = make.communicate(timeout=120)[0]
        assert make.returncode != 0
        ended = _written(tree / "data" / "results")
        assert _running_in(tree) == [], "".join(seen) + rest
        time.sleep(5)  # a worker, kernel or server left behind would go on writing
        assert _running_in(tree) == []
        assert _written(tree / "data" / "results") == ended
        assert "every worker ended" in rest, rest
    finally:
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGKILL)
