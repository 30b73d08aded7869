"""Synthetic llama models: they load and generate, tokenize as their fixture does, and are reproducible."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

import llama_cpp
import pytest
from gguf import GGUFWriter

from llgbridge import synth
from llgbridge.errors import InputError
from llgbridge.paths import VOCABS

# llama-bpe's build is a few seconds (GGUFWriter packs 128k tokens and 280k merges one by one), so
# each vocab is built once per session and the second, byte-comparison build is done for llama-spm only.
VOCABS_UNDER_TEST = ["llama-spm", "llama-bpe"]


def fixture(name: str) -> Path:
    return VOCABS / f"ggml-vocab-{name}.gguf"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("models")
    return {n: synth.make_model(fixture(n), out / f"synthetic-{n}.gguf") for n in VOCABS_UNDER_TEST}


@cache
def vocab_only(name: str) -> llama_cpp.Llama:
    return llama_cpp.Llama(model_path=str(fixture(name)), vocab_only=True, verbose=False)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("name", VOCABS_UNDER_TEST)
def test_loads_tokenizes_like_its_fixture_and_generates(built: dict[str, Path], name: str) -> None:
    llm = llama_cpp.Llama(model_path=str(built[name]), n_ctx=512, n_threads=2, verbose=False, logits_all=False)
    assert llm.tokenize(b"hello", add_bos=False) == vocab_only(name).tokenize(b"hello", add_bos=False)
    out = llm.create_completion("hello", max_tokens=5, temperature=0.0)
    assert out["usage"]["completion_tokens"] >= 1


def test_same_seed_gives_the_same_bytes(built: dict[str, Path], tmp_path: Path) -> None:
    again = synth.make_model(fixture("llama-spm"), tmp_path / "again.gguf", seed=0)
    assert sha256(again) == sha256(built["llama-spm"])
    other = synth.make_model(fixture("llama-spm"), tmp_path / "other.gguf", seed=1)
    assert sha256(other) != sha256(built["llama-spm"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again.gguf", "other.gguf"]  # no temporary left


def test_is_synthetic_tells_a_built_model_from_its_fixture(built: dict[str, Path]) -> None:
    assert synth.is_synthetic(built["llama-spm"]) is True
    assert synth.is_synthetic(fixture("llama-spm")) is False


def test_ensure_model_builds_only_when_missing_or_of_another_seed(tmp_path: Path) -> None:
    path = synth.ensure_model("llama-spm", tmp_path)
    assert path == tmp_path / "synthetic-llama-spm.gguf"
    first = sha256(path)
    stamp = path.stat().st_mtime_ns
    assert synth.ensure_model("llama-spm", tmp_path) == path
    assert path.stat().st_mtime_ns == stamp
    synth.ensure_model("llama-spm", tmp_path, seed=1)
    assert sha256(path) != first


def test_a_file_that_is_not_gguf_is_refused_with_its_path(tmp_path: Path) -> None:
    bad = tmp_path / "notes.gguf"
    bad.write_bytes(b"this is not a model\n")
    with pytest.raises(InputError, match="not a GGUF") as err:
        synth.make_model(bad, tmp_path / "out.gguf")
    assert str(bad) in str(err.value)
    with pytest.raises(InputError, match="not a GGUF"):
        synth.is_synthetic(bad)
    assert not (tmp_path / "out.gguf").exists()


def test_a_gguf_without_a_tokenizer_is_refused(tmp_path: Path) -> None:
    bare = tmp_path / "bare.gguf"
    w = GGUFWriter(bare, "llama")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()
    with pytest.raises(InputError, match="no tokenizer"):
        synth.make_model(bare, tmp_path / "out.gguf")
