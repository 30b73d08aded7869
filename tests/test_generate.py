"""End-to-end generation through each bridge on synthetic models (guide 8)."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from conftest import variant

from llgbridge import bridges, grammars, synth
from llgbridge import cases as C
from llgbridge import generate as R
from llgbridge import generation as G
from llgbridge.modelfile import ModelFile
from llgbridge.paths import ROOT
from llgbridge.vocab import Vocab


@cache
def model(name: str) -> tuple[object, Vocab]:
    path = synth.ensure_model(name)
    return G.load_model(ModelFile.read(path)), Vocab(path, name)


@cache
def run(name: str, var: str, case: str) -> R.MatrixRow:
    llm, v = model(name)
    return R.run_case(llm, f"synthetic-{name}", v, True, bridges.make_bridge(v, var), C.CASES[case])


@pytest.mark.guards("documents bug B: upstream drops the constraint on SPM")
def test_upstream_leaves_the_literal_on_llama_spm() -> None:
    r = run("llama-spm", variant("upstream"), "forced_literal")
    assert r.llg_errors >= 1
    assert r.error.startswith("Parser Error: token")
    assert r.outcome == "violation" and not grammars.FORCED_LITERAL.startswith(r.output)


@pytest.mark.guards("bugs A and B on SentencePiece")
@pytest.mark.parametrize("good", ["fixed", "sentinel"])
@pytest.mark.parametrize("case", ["forced_literal", "json_enum", "half_free"])
def test_fixed_and_sentinel_pass_on_llama_spm(case: str, good: str) -> None:
    r = run("llama-spm", variant(good), case)
    assert (r.outcome, r.llg_errors) == ("pass", 0), r.output


@pytest.mark.parametrize("case", ["forced_literal", "json_enum", "half_free"])
def test_fixed_passes_on_llama_bpe(case: str) -> None:
    r = run("llama-bpe", "fixed", case)
    assert (r.outcome, r.llg_errors) == ("pass", 0), r.output


@pytest.mark.guards("bug A on BPE: clean_spaces strips ' ..' to '..'")
def test_upstream_emits_a_space_the_grammar_forbids_on_llama_bpe() -> None:
    r = run("llama-bpe", variant("upstream"), "dots")
    assert r.outcome == "violation" and " " in r.output, r.output
    assert r.llg_errors == 0  # not an error: the matcher believes it emitted dots


def test_fixed_emits_only_dots_on_llama_bpe() -> None:
    r = run("llama-bpe", "fixed", "dots")
    assert r.outcome == "pass" and " " not in r.output


@pytest.mark.slow
def test_a_users_model_runs_through_the_matrix_notebook(tmp_path: Path) -> None:
    # the path `make matrix MODELS=...` takes, with a synthetic model under another name
    mine = tmp_path / "my-model.gguf"
    shutil.copy(synth.ensure_model("llama-bpe"), mine)
    cmd = [
        sys.executable,
        "-m",
        "llgbridge.run",
        "matrix",
        "my-model",
        "--models",
        shlex.quote(str(mine)),
        "-p",
        "cases",
        '["forced_literal"]',
        "--out-root",
        str(tmp_path / "reports"),
        "--results",
        str(tmp_path / "results"),
    ]
    subprocess.run(cmd, check=True, cwd=ROOT)
    res = json.loads((tmp_path / "results" / "matrix" / "my-model.json").read_text())
    assert res["status"] == "ok", res
    assert [(r["model"], r["bridge"], r["outcome"]) for r in res["rows"]] == [
        ("my-model.gguf", "upstream", "pass"),
        ("my-model.gguf", "fixed", "pass"),
        ("my-model.gguf", "sentinel", "pass"),
    ]
    assert res["device"] == "CPU"
