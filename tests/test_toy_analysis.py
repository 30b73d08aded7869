"""Adding an analysis is its own package and nothing else: a toy analysis from a temporary folder
(tests/toy_analysis/, copied as the package `toy_llg` and named in LLGBRIDGE_ANALYSES) joins the
registry, is run by `make report`'s planner on a real fixture, lands in the results, is drawn on
the page with its table, and runs in a what-if, with no file of the suite edited."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import gguf
import pytest

from llgbridge.paths import ROOT, vocab_path

HERE = Path(__file__).parent
VOCAB = "llama-spm"


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], Path]:
    tmp = tmp_path_factory.mktemp("toy")
    shutil.copytree(HERE / "toy_analysis", tmp / "pkgs" / "toy_llg")
    env = {
        **os.environ,
        "LLGBRIDGE_ANALYSES": "toy_llg",
        "PYTHONPATH": os.pathsep.join([str(tmp / "pkgs"), str(ROOT / "lib")]),
    }
    return env, tmp


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_the_registry_finds_the_toy_beside_the_analyses_of_the_suite(toy: tuple[dict[str, str], Path]) -> None:
    env, _ = toy
    got = _run(env, "-c", "from llgbridge import analyses; print(' '.join(analyses.names()))")
    assert got.returncode == 0, got.stderr
    names = got.stdout.split()
    assert "toy" in names and {"census", "server"} <= set(names)


def test_the_toy_runs_lands_in_the_results_and_is_drawn_on_the_page(toy: tuple[dict[str, str], Path]) -> None:
    env, tmp = toy
    results, out = tmp / "results", tmp / "reports"
    ran = _run(
        env, "-m", "llgbridge.batch", "--inputs", f"every={VOCAB}", "--analyses", "toy", "--results", str(results)
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert f"[{VOCAB}] toy (" in ran.stdout  # planned as out of date, as every analysis is before its first run
    assert (results / "toy" / f"{VOCAB}.json").is_file()
    drawn = _run(env, "-m", "llgbridge.report", "--results", str(results), "--out", str(out))
    assert drawn.returncode == 0, drawn.stdout + drawn.stderr
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "The toy analysis" in page and "Toy tokens with a leading space, on 1 vocab." in page
    (row,) = list(csv.DictReader((out / "tables" / "toy.csv").open(encoding="utf-8")))
    # the token count as the GGUF file itself lists its tokens, read by gguf-py, not by the suite
    tokens = gguf.GGUFReader(vocab_path(VOCAB)).get_field("tokenizer.ggml.tokens")
    assert row["vocab"] == VOCAB and int(row["n_tokens"]) == len(tokens.data)


def test_a_whatif_runs_the_toy_and_draws_its_table(toy: tuple[dict[str, str], Path]) -> None:
    env, tmp = toy
    out = tmp / "whatif"
    code = (
        "from pathlib import Path; from llgbridge import whatif; "
        f"st = whatif.whatif(Path({str(vocab_path(VOCAB))!r}), 'toy-whatif', out=Path({str(out)!r}), "
        "names=whatif.chosen('toy')); print([s['status'] for s in st])"
    )
    got = _run(env, "-c", code)
    assert got.returncode == 0 and "['ok']" in got.stdout, got.stdout + got.stderr
    (row,) = list(csv.DictReader((out / "tables" / "toy.csv").open(encoding="utf-8")))
    assert row["vocab"] == "toy-whatif"
    assert "The toy analysis" in (out / "index.html").read_text(encoding="utf-8")
