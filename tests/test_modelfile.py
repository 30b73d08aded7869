"""A model is an input, its header read once (issue 61): the server's and the matrix's runs on one
model, from where the notebook makes its value (`matrix.model_files`) to the last row, read the
model file's header once. Counted at the one function that reads a GGUF header
(`gguf_meta.read_kv`), wrapped so that each call on the model's file is counted and then made for
real; before, the server's run read it three times (its generative check, the vocab's tokenizer
check, the load's generative check) and its notebook a fourth (`synth.is_synthetic`)."""

from __future__ import annotations

import shutil
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llgbridge import gguf_meta, synth
from llgbridge.analyses.matrix import compute as matrix
from llgbridge.analyses.server import compute as server
from llgbridge.analyses.server import llama_server as S
from llgbridge.errors import InputError
from llgbridge.inputs import Input
from llgbridge.modelfile import ModelFile

READS: Counter[Path] = Counter()


@pytest.fixture
def counted() -> Iterator[Counter[Path]]:
    """`gguf_meta.read_kv` counted wherever the library holds it (every module that imported the
    name), each call still made for real; put back after the test."""
    real = gguf_meta.read_kv

    def read_kv(path: Path) -> Any:
        READS[Path(path).resolve()] += 1
        return real(path)

    holders = [
        m for n, m in list(sys.modules.items()) if n.startswith("llgbridge") and getattr(m, "read_kv", None) is real
    ]
    READS.clear()
    for m in holders:
        m.read_kv = read_kv  # type: ignore[attr-defined]
    try:
        yield READS
    finally:
        for m in holders:
            m.read_kv = real  # type: ignore[attr-defined]


def _model_input(tmp_path: Path) -> Input:
    """llama-spm's synthetic model as a file given on its own (`make matrix MODELS=...`): a copy of
    its own, so no earlier read of this process stands for this one."""
    copy = tmp_path / "synthetic-llama-spm.gguf"
    shutil.copyfile(synth.ensure_model("llama-spm"), copy)
    return Input.make("model-spm", models=[str(copy)])


def test_the_server_reads_the_models_header_once(tmp_path: Path, counted: Counter[Path]) -> None:
    status, why = S.built()
    if why:
        pytest.fail(f"servers not built: {why} (make server)")
    it = _model_input(tmp_path)
    (model,) = matrix.model_files(it, "data/models", 0)  # where the server notebook makes it
    opts = server.RunOptions(samplers=("fixed",), candidates=(), log_dir=tmp_path / "logs")
    run = server.run("llama-spm", model, model.synthetic, None, ["forced_literal"], opts, say=lambda s: None)
    assert [r.outcome for r in run.rows if r.case == "forced_literal"] == ["pass"] * len(status["llguidance"])
    assert counted[model.path.resolve()] == 1, f"the model's header was read {counted[model.path.resolve()]} times"


def test_the_matrix_reads_the_models_header_once(tmp_path: Path, counted: Counter[Path]) -> None:
    it = _model_input(tmp_path)
    models = matrix.model_files(it, "data/models", 0)
    s = matrix.Settings(["forced_literal"], ["fixed"], max_tokens=8)
    m = matrix.run("llama-spm", False, models, (), s)
    assert [r.bridge for r in m.rows] == ["fixed"]
    assert counted[models[0].path.resolve()] == 1


def test_a_model_file_is_read_again_once_it_changed(tmp_path: Path, counted: Counter[Path]) -> None:
    """Read once a process while unchanged (the matrix and the server in one kernel share it), and
    again once another file stands at its path."""
    it = _model_input(tmp_path)
    path = it.files()[0]
    first = ModelFile.read(path)
    assert ModelFile.read(path) is first and counted[path.resolve()] == 1
    shutil.copyfile(path, tmp_path / "other.gguf")
    (tmp_path / "other.gguf").replace(path)  # another inode at the same path
    assert ModelFile.read(path) == first and counted[path.resolve()] == 2


def test_a_vocab_only_file_is_refused_from_its_value() -> None:
    """A fixture has no weights: the value says so from the one read, in one line."""
    from llgbridge.paths import vocab_path

    f = ModelFile.read(vocab_path("llama-spm"))
    assert (f.n_tensors, f.generative, f.synthetic) == (0, False, False)
    with pytest.raises(InputError, match="vocab-only file"):
        f.require_generative()
