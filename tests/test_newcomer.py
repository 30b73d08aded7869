"""The newcomer's path (issue 49) and the command line's edge (issue 48): the commands a new user
types first, in a folder like theirs, each refusing a mistake in one line before anything runs,
and what they type never run as code."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from helpers import SPM

from llgbridge.analyses.native import compute as native
from llgbridge.llg import _library_path
from llgbridge.paths import ROOT


def _env(**extra: str) -> dict[str, str]:
    """This environment without the Make that may be running the tests (its jobserver and flags),
    and without any parameter of the Makefile a test's own make could inherit."""
    drop = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "VOCAB", "NAME", "PARAMS", "MODELS", "OVERRIDE", "ANALYSES", "CUDA"}
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **extra}


def _make(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", *args], cwd=cwd, capture_output=True, text=True, env=env or _env(), timeout=120, check=False
    )


def _tree(tmp_path: Path) -> Path:
    """A checkout's Makefile and what it reads before the venv exists, for a make that must not touch ROOT."""
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy2(ROOT / name, tree / name)
    (tree / "lib").symlink_to(ROOT / "lib")
    return tree


# -- a checkout whose path has a space (issue 49, 1) --------------------------------------------------
@pytest.mark.slow
def test_the_native_build_runs_in_a_checkout_whose_path_has_a_space(tmp_path: Path) -> None:
    """Make cannot quote a space in a file name, and the build named every file absolutely: in
    `…/my checkout/llgbridge` it refused ("has a space in it … move the checkout") and every native
    and server result failed. Make now runs in the checkout and names its files relative to it, and
    a binary finds the libraries in the checkout relative to itself ($ORIGIN): one of llama.cpp's
    tests, built from such a checkout, runs and answers as the real build's does."""
    if why := native.unavailable():
        pytest.skip(why)
    root = tmp_path / "my checkout" / "llgbridge"
    shutil.copytree(ROOT / "native", root / "native")
    out = root / "data" / "native"
    out.mkdir(parents=True)
    (out / "src").symlink_to(native.NATIVE / "src")  # the extracted trees, as `make native` leaves them
    llg = out / "llg" / _library_path().name  # inside the checkout: found relative to the binary
    llg.parent.mkdir()
    shutil.copy2(_library_path(), llg)
    target = out / "bin" / "test-shipped-upstream"
    native.run_make(
        root / "native" / "Makefile", native.make_vars(out, llg, root), "native build", None, (target,), root
    )
    assert "$ORIGIN/../llg" in subprocess.run(["readelf", "-d", str(target)], capture_output=True, text=True).stdout
    built = subprocess.run([str(target), str(SPM)], capture_output=True, timeout=300, cwd=tmp_path)
    real = subprocess.run([str(native.BIN / target.name), str(SPM)], capture_output=True, timeout=300, cwd=tmp_path)
    assert (built.returncode, built.stdout) == (real.returncode, real.stdout), built.stderr[-2000:]


def test_a_path_make_cannot_take_is_refused_in_one_line_naming_it(tmp_path: Path) -> None:
    """Outside the checkout, a library's folder may have a space (it is only a quoted word of the
    link command), but not a `$`, which make would expand; a source tree in a folder with a space
    cannot be named in a rule at all. Each is refused before make runs, naming the path."""
    bins = ROOT / "data" / "native" / "bin"
    spaced = tmp_path / "with space" / "lib"
    assert native.library_vars("LLG", spaced, bins) == {"LLG_DIR": str(spaced), "LLG_RPATH": str(spaced)}
    priced = tmp_path / "price $5" / "lib"
    with pytest.raises(RuntimeError) as e:
        native.library_vars("LLG", priced, bins)
    assert str(e.value) == (
        f"{str(priced)!r} has '$' in it, which make cannot pass to the linker; move it to a path without one"
    )
    with pytest.raises(RuntimeError) as e:
        native.make_name(spaced)
    assert str(e.value) == (
        f"{str(spaced)!r} has a space in it, which make cannot quote in a file name; move it to a path without one"
    )


# -- make lab as root (issue 49, 2) -------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_make_lab_starts_as_root_on_localhost_and_says_where(tmp_path: Path) -> None:
    """As root (containers, CI images: this suite's CI) Jupyter refused ("Running as root is not
    recommended. Use --allow-root to bypass", exit 1). `make lab` starts, says on its first line
    where it listens and how to stop it, and answers there."""
    port = _free_port()
    log = tmp_path / "lab.log"
    with log.open("w") as f:
        lab = subprocess.Popen(
            ["make", "-s", "lab", f"LAB_PORT={port}"],
            cwd=ROOT,
            stdout=f,
            stderr=subprocess.STDOUT,
            env=_env(JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime")),
            start_new_session=True,
        )
    try:
        deadline, answer = time.monotonic() + 90, None
        while answer is None and lab.poll() is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api", timeout=2) as r:
                    answer = r.read()
            except OSError:
                time.sleep(0.5)
        said = log.read_text()
        assert answer is not None and b'"version"' in answer, said[-2000:]
        assert said.splitlines()[0] == (
            f"== JupyterLab on http://127.0.0.1:{port}/lab (the address with its token follows); Ctrl-C stops it"
        )
    finally:
        os.killpg(lab.pid, signal.SIGTERM)
        try:
            lab.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(lab.pid, signal.SIGKILL)
            lab.wait(timeout=10)


# -- commands that say what they do (issue 49, 3) -----------------------------------------------------
def test_bare_make_makes_the_report() -> None:
    """FORCE was the first target, so a bare `make` said "Nothing to be done for 'FORCE'"."""
    out = _make("-pnq", "help").stdout
    assert re.search(r"^\.DEFAULT_GOAL := all$", out, re.M) and re.search(r"^all: report$", out, re.M)


def test_make_help_lists_every_target_the_readme_names() -> None:
    """The README says `make help` lists the targets; it left out distclean and lint."""
    targets = set(re.search(r"^\.PHONY: (.*)$", (ROOT / "Makefile").read_text(), re.M)[1].split())  # type: ignore[index]
    named = set(re.findall(r"\bmake ([a-z][a-z-]+)", (ROOT / "README.md").read_text())) & targets
    helped = _make("-s", "help").stdout
    assert {"distclean", "lint", "test-swapped", "quotes", "report", "test"} <= named
    assert not sorted(t for t in named if not re.search(rf"^make {re.escape(t)}\b", helped, re.M)), helped


def test_make_whatif_without_a_file_shows_every_parameter() -> None:
    done = _make("-s", "whatif")
    assert done.returncode == 2
    assert done.stdout.splitlines() == [
        "usage: make whatif VOCAB=path/to/file.gguf [NAME=name] [PARAMS=\"-p grammar 'start: /[a-z]+/'\"] "
        '[OVERRIDE="KEY=TYPE:VALUE ..."]'
    ]


def test_make_n_report_with_nothing_to_run_says_so() -> None:
    """`make -n report` printed only the pool's command line when no analysis was to run."""
    done = _make("-n", "report", "INPUTS=VOCABS= REAL_VOCABS= MATRIX_VOCABS= CORPUS_SAMPLE_VOCABS=")
    assert done.returncode == 0, done.stderr
    said = [ln for ln in done.stdout.splitlines() if "llgbridge.batch" not in ln]
    assert "nothing to run: every result is current" in said, done.stdout


def test_a_mistyped_input_is_refused_in_one_line_and_nothing_is_written(tmp_path: Path) -> None:
    """`llgbridge.run forced llama-spn` ran, printed FAILED, exited 0 and wrote a failed result for
    an input that never existed; the next `make report` called it an input that is gone."""
    done = subprocess.run(
        [sys.executable, "-m", "llgbridge.run", "forced", "llama-spn", "--results", str(tmp_path / "results")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "[forced] llama-spn: no such input: data/vocabs/ggml-vocab-llama-spn.gguf does not exist (did you mean "
        "llama-spm?); nothing was run"
    ]
    assert not list(tmp_path.rglob("*.json")) and not (ROOT / "data" / "byhand" / "forced" / "llama-spn.json").exists()


# -- a GPU build (issue 49, 6) --------------------------------------------------------------------------
def test_setup_cuda_without_nvcc_stops_in_one_line_before_installing(tmp_path: Path) -> None:
    """CUDA=1 forced a reinstall without pip's cache and only then found out nvcc was missing."""
    tree = _tree(tmp_path)
    path = ":".join(d for d in os.environ["PATH"].split(":") if d and not (Path(d) / "nvcc").exists())
    env = {k: v for k, v in _env(PATH=path).items() if k != "CUDACXX"}
    # PYTHON=false: a Makefile that went on to install would stop at its first step, not compile for minutes
    done = _make("setup", "CUDA=1", "PYTHON=false", cwd=tree, env=env)
    assert done.returncode == 2
    assert done.stderr.splitlines()[0] == (
        "make setup CUDA=1: no nvcc (the CUDA toolkit's compiler) on PATH or in CUDACXX; nothing was installed"
    )
    assert not (tree / ".venv").exists() and not done.stdout
    assert "reinstalled without pip's cache" in _make("-n", "setup", "CUDA=1", cwd=tree, env=env).stdout


# -- what a user types is never code (issue 48, 8) ------------------------------------------------------
HOSTILE = {
    "VOCAB": "v$(shell touch pwn-vocab).gguf",
    "NAME": "n`touch pwn-name`",
    "PARAMS": "-p literal '$(shell touch pwn-params)'",
    "OVERRIDE": "general.name=str:$$(touch pwn-override)",
    "ANALYSES": "census $(shell touch pwn-analyses) `touch pwn-analyses2` $$(touch pwn-analyses3)",
    "MODELS": "m$(shell touch pwn-models).gguf",
    "CORPUS_VOCABS": "$(shell touch pwn-corpus)",
}


def test_a_name_on_the_command_line_is_never_run_by_make_or_a_shell(tmp_path: Path) -> None:
    """`make whatif VOCAB='v$(shell touch pwn4).gguf'` created pwn4: Make expanded the variable when
    it exported it to the recipe. Every parameter, given on the command line or in the environment,
    reaches the recipes as the text typed."""
    tree = _tree(tmp_path)
    (tree / "Makefile").write_text(
        (tree / "Makefile").read_text() + '\nshow:\n\t@printf "%s\\n" "$$VOCAB" "$$NAME" "$$ANALYSES"\n'
    )
    given = [f"{k}={v}" for k, v in HOSTILE.items()]
    assert _make("-s", "help", *given, cwd=tree).returncode == 0
    assert _make("-s", "help", cwd=tree, env=_env(**HOSTILE)).returncode == 0
    shown = _make("-s", "show", *given, cwd=tree)
    assert shown.stdout.splitlines() == [HOSTILE["VOCAB"], HOSTILE["NAME"], HOSTILE["ANALYSES"]], shown.stderr
    _make("-n", "report", *given, cwd=tree)  # the pool's line, as -n prints it
    bad = _make("-s", "help", "CUDA=$(shell touch pwn-cuda)", cwd=tree)
    assert bad.returncode == 2 and bad.stderr.strip().endswith("CUDA=$(shell touch pwn-cuda): must be 0 or 1.  Stop.")
    assert not sorted(p.name for p in tmp_path.rglob("pwn*"))


# -- make matrix on the user's models (issue 48, 6 and 10) ----------------------------------------------
def test_make_matrix_refuses_two_models_of_one_name_and_a_missing_file(tmp_path: Path) -> None:
    """Two files both named model.gguf became one input (the second's rows replaced the first's), and
    a missing file exited 0."""
    for d in ("m1", "m2"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "model.gguf").symlink_to(SPM)
    both = f"{tmp_path / 'm1' / 'model.gguf'} {tmp_path / 'm2' / 'model.gguf'}"
    done = _make("-s", "matrix", f"MODELS={both}")
    assert done.returncode == 2
    assert done.stderr.splitlines()[0] == (
        f"MODELS: {tmp_path / 'm1' / 'model.gguf'} and {tmp_path / 'm2' / 'model.gguf'} would both be the input "
        "model-model: rename one of them; nothing was run"
    )
    gone = _make("-s", "matrix", "MODELS=nonexist.gguf")
    assert (
        gone.returncode == 2 and gone.stderr.splitlines()[0] == "MODELS: nonexist.gguf: no such file; nothing was run"
    )


# -- what setup says (issue 49, 4) ----------------------------------------------------------------------
def test_placing_the_schemas_names_the_folder_they_went_to(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`make corpus-data` said "placed 583 schema files in schemas/", where the folder is data/schemas."""
    from llgbridge.analyses.corpus import schemas

    dest = tmp_path / "data" / "schemas"
    shutil.copytree(schemas.SCHEMA_DIR, dest)
    next(dest.glob("*.json")).unlink()
    schemas.ensure(dest, cache=schemas.SCHEMA_DIR.parent / "sdist")
    assert capsys.readouterr().out == f"placed 1 schema files in {dest}/\n"


def test_a_cause_shared_by_many_inputs_is_one_line() -> None:
    """A native build that cannot start fails all 22 native runs with one cause: the report's closing
    lines said it 22 times (issue 49, item 4); now one line per analysis and cause, naming the inputs."""
    from llgbridge.report.pages import failure_lines

    why = "native build failed: no C++ compiler"
    failed = [{"notebook": "native", "vocab": v, "error": why} for v in ("aquila", "baichuan", "bert-bge", "gpt-2")]
    failed.append({"notebook": "census", "vocab": "cut", "error": "InputError: truncated GGUF"})
    assert failure_lines(failed) == [
        f"FAILED native/4 inputs (aquila, baichuan, bert-bge, …): {why}",
        "FAILED census/cut: InputError: truncated GGUF",
    ]
