"""Fixtures are fetched once, verified against the committed manifest, and never half-written."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from llgbridge import fixtures, paths
from llgbridge.errors import InputError
from llgbridge.paths import VOCABS


def test_manifest_lists_the_19_vocabs() -> None:
    assert len(fixtures.vocab_names()) == 19
    assert {"llama-spm", "llama-bpe", "gemma-4", "bert-bge", "qwen35"} <= set(fixtures.vocab_names())


def test_fetched_fixtures_match_the_manifest() -> None:
    assert fixtures.verify(VOCABS) == []


def _fake_sdist(tmp: Path, files: dict[str, bytes]) -> Path:
    p = tmp / "sdist.tar.gz"
    with tarfile.open(p, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(fixtures.MEMBER_PREFIX + "models/" + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return p


def test_checksum_mismatch_is_clear_and_places_nothing(tmp_path: Path) -> None:
    sdist = _fake_sdist(tmp_path, {"ggml-vocab-a.gguf": b"GGUF good", "ggml-vocab-b.gguf": b"GGUF tampered"})
    want = {
        "ggml-vocab-a.gguf": hashlib.sha256(b"GGUF good").hexdigest(),
        "ggml-vocab-b.gguf": hashlib.sha256(b"GGUF original").hexdigest(),
    }
    dest = tmp_path / "vocabs"
    with pytest.raises(InputError, match=r"ggml-vocab-b.gguf: checksum mismatch .*nothing was placed"):
        fixtures.extract(sdist, dest, want)
    assert list(dest.iterdir()) == []


def test_extract_places_verified_files(tmp_path: Path) -> None:
    sdist = _fake_sdist(tmp_path, {"ggml-vocab-a.gguf": b"GGUF good"})
    dest = tmp_path / "vocabs"
    placed = fixtures.extract(sdist, dest, {"ggml-vocab-a.gguf": hashlib.sha256(b"GGUF good").hexdigest()})
    assert placed == ["ggml-vocab-a.gguf"] and (dest / "ggml-vocab-a.gguf").read_bytes() == b"GGUF good"


def test_ensure_is_a_no_op_when_present(tmp_path: Path) -> None:
    # with every fixture present, ensure() must not touch the network or the files
    before = {p.name: p.stat().st_mtime_ns for p in VOCABS.glob("*.gguf")}
    fixtures.ensure(VOCABS, cache=tmp_path / "no-such-cache")
    assert {p.name: p.stat().st_mtime_ns for p in VOCABS.glob("*.gguf")} == before
    assert not (tmp_path / "no-such-cache").exists()


def test_a_vocab_is_named_by_its_file_and_a_dropped_fixture_joins(tmp_path: Path) -> None:
    assert paths.vocab_name(paths.vocab_path("llama-spm")) == "llama-spm"
    assert paths.vocab_name(Path("models/my-model.gguf")) == "my-model"
    (tmp_path / "ggml-vocab-mine.gguf").write_bytes(b"GGUF")
    (tmp_path / "notes.gguf").write_bytes(b"GGUF")
    assert fixtures.vocab_names(extra=tmp_path) == sorted([*fixtures.vocab_names(), "mine"])


def test_a_dropped_fixture_named_as_a_real_model_is_refused_naming_both_files(tmp_path: Path) -> None:
    # issue 24.8: a gpt-2 vocab dropped in as ggml-vocab-smollm2-135m.gguf was listed twice,
    # ignored, and the census showed SmolLM2's row under its name
    (tmp_path / "ggml-vocab-smollm2-135m.gguf").write_bytes((VOCABS / "ggml-vocab-gpt-2.gguf").read_bytes())
    (tmp_path / "ggml-vocab-fine.gguf").write_bytes(b"GGUF")
    names = fixtures.vocab_names(extra=tmp_path)
    assert "fine" in names and "smollm2-135m" not in names
    [r] = fixtures.refused(tmp_path)
    assert r["vocab"] == "ggml-vocab-smollm2-135m.gguf" and "\n" not in r["error"]
    assert r["error"] == (
        "refused file name: ggml-vocab-smollm2-135m.gguf claims the name 'smollm2-135m', which the real model "
        "data/models/SmolLM2-135M-Instruct.Q4_1.gguf holds (it keeps it); rename the file"
    )
