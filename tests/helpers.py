"""Helpers more than one test module uses: hostile inputs made from the real fixtures, throwaway
notebooks, and where the programs a test runs in a process of its own live (`programs/`).
Test modules import them from here (`from helpers import ...`), never from each other.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gguf import Keys

from llgbridge.paths import vocab_path

SPM = vocab_path("llama-spm")
PROGRAMS = Path(__file__).with_name("programs")  # scripts a test runs in a process of its own


def write_vocab(path: Path, change: Callable[[str, Any], Any]) -> Path:
    """A vocab-only GGUF with llama-spm's tokenizer keys, one of them changed: well-formed bytes."""
    import gguf

    from llgbridge.synth import _tokenizer_kv

    w = gguf.GGUFWriter(str(path), "llama")
    for key, (value, vtype, sub) in _tokenizer_kv(SPM).items():
        w.add_key_value(key, change(key, value), vtype, sub)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def all_control(key: str, value: Any) -> Any:
    """For `write_vocab`: every token typed CONTROL, so no token is text llguidance can emit."""
    return [3] * len(value) if key == Keys.Tokenizer.TOKEN_TYPE else value


def write_notebook(folder: Path, name: str, code: str) -> None:
    """`folder/name.ipynb`: a parameters cell (`input`, `results_dir`), then `code`."""
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "id": "p",
                "metadata": {"tags": ["parameters"]},
                "outputs": [],
                "source": ["input = ''\n", "results_dir = ''"],
            },
            {"cell_type": "code", "execution_count": None, "id": "c", "metadata": {}, "outputs": [], "source": [code]},
        ],
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (folder / f"{name}.ipynb").write_text(json.dumps(nb))


def abort_notebook(tmp_path: Path) -> Path:
    """A folder with a notebook `abort` that makes the real llama.cpp abort its kernel: a vocab
    with a duplicate token loaded past the suite's own check, so llama.cpp's GGML_ASSERT fires."""
    dup = write_vocab(
        tmp_path / "dup.gguf", lambda k, v: v[:300] + [v[301]] + v[301:] if k == Keys.Tokenizer.LIST else v
    )
    nb = tmp_path / "nbs"
    nb.mkdir(exist_ok=True)
    code = (
        f"import llama_cpp\np = llama_cpp.llama_model_default_params()\np.vocab_only = "
        f"True\nllama_cpp.llama_model_load_from_file({str(dup).encode()!r}, p)"
    )
    write_notebook(nb, "abort", code)
    return nb


def census_needs_no_models(tree: Path) -> None:
    """Mark a tree copy's real models, synthetic models and schemas as there: the census reads
    none of them (`CENSUS_ONLY` runs no input of theirs), and fetching them is no test's business."""
    for stamp in ("models/.fetched", "models/.synthetic", "schemas/.complete"):
        (tree / "data" / stamp).parent.mkdir(parents=True, exist_ok=True)
        (tree / "data" / stamp).touch()


# make report's own path in a copy of the tree, with the census alone (the cheapest analysis): no
# matrix, real models, corpus sample, native or server build (`census_needs_no_models`)
CENSUS_ONLY = [
    "ANALYSES=census",
    "INPUTS=MATRIX_VOCABS= REAL_VOCABS= CORPUS_SAMPLE_VOCABS=",
    "NATIVE_SRC=",
    "SERVER_SRC=",
    "STAMP=.stamp",
]
