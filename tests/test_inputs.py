"""Bad inputs get one line naming the input and the cause; crashes and hangs stay isolated."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import bridge
from gguf import Keys
from helpers import SPM, write_notebook, write_vocab

from llgbridge import bridges, gguf_fuzz, run
from llgbridge import generation as G
from llgbridge.errors import InputError
from llgbridge.inputs import Input
from llgbridge.modelfile import ModelFile
from llgbridge.paths import vocab_path
from llgbridge.vocab import Vocab


def one_line_error(path: Path) -> str:
    with pytest.raises((InputError, ValueError)) as e:
        Vocab(path)
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg, msg
    return msg


def test_missing_path(tmp_path: Path) -> None:
    assert one_line_error(tmp_path / "nope.gguf").endswith("no such file")


def test_directory(tmp_path: Path) -> None:
    assert one_line_error(tmp_path).endswith("is a directory, not a GGUF file")


def test_empty_file(tmp_path: Path) -> None:
    (tmp_path / "e.gguf").write_bytes(b"")
    assert one_line_error(tmp_path / "e.gguf").endswith("empty file")


@pytest.mark.parametrize(
    "content", [b"hello, I am text\n", bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8))]
)
def test_text_and_random_bytes(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "x.gguf").write_bytes(content)
    assert "not a GGUF file" in one_line_error(tmp_path / "x.gguf")


@pytest.mark.parametrize(
    "cut, where",
    [(10, "tensor count"), (100, "general.name"), (5000, "tokenizer.ggml.tokens["), (400_000, "tokenizer.ggml.")],
)
def test_truncated(tmp_path: Path, cut: int, where: str) -> None:
    p = tmp_path / f"cut{cut}.gguf"
    p.write_bytes(SPM.read_bytes()[:cut])
    msg = one_line_error(p)
    assert "truncated GGUF" in msg and where in msg, msg


def _replace_once(data: bytes, old: bytes, new: bytes) -> bytes:
    i = data.index(old)
    return data[:i] + new + data[i + len(old) :]


def test_unknown_tokenizer_model(tmp_path: Path) -> None:
    data = SPM.read_bytes()
    key = data.index(b"tokenizer.ggml.model")
    j = data.index(b"llama", key)
    p = tmp_path / "unknown.gguf"
    p.write_bytes(data[:j] + b"llamx" + data[j + 5 :])
    assert "unknown tokenizer: 'llamx'" in one_line_error(p)


def test_score_count_differs_from_token_count(tmp_path: Path) -> None:
    p = write_vocab(tmp_path / "scores.gguf", lambda k, v: v[:-1] if k == Keys.Tokenizer.SCORES else v)
    assert one_line_error(p).endswith("inconsistent tokenizer: 32000 tokens but 31999 entries in tokenizer.ggml.scores")


def test_a_piece_longer_than_the_bridge_buffer(tmp_path: Path) -> None:
    p = write_vocab(
        tmp_path / "long.gguf", lambda k, v: v[:300] + [b"a" * 2000] + v[301:] if k == Keys.Tokenizer.LIST else v
    )
    v = Vocab(p)
    for name in ("upstream", "fixed"):  # sentinel's buffer is 16 kB, as llamacpp.py's
        with pytest.raises(InputError) as e:
            bridges.make_bridge(v, name)
        msg = str(e.value)
        assert (
            msg.startswith(f"{p}: ")
            and "2000 bytes, longer than the bridge's 1024-byte buffer (upstream aborts)" in msg
        )


def test_vocab_only_file_given_to_generation() -> None:
    with pytest.raises(InputError, match=r"ggml-vocab-bert-bge.gguf: vocab-only file"):
        G.load_model(ModelFile.read(vocab_path("bert-bge")))


def test_encoder_only_model_given_to_generation(tmp_path: Path) -> None:
    import gguf

    p = tmp_path / "bert-model.gguf"
    w = gguf.GGUFWriter(str(p), "bert")
    w.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(InputError, match=r"bert-model.gguf: encoder-only architecture 'bert'"):
        G.load_model(ModelFile.read(p))


def test_json_schema_llguidance_rejects() -> None:
    with pytest.raises(InputError, match="llguidance rejected it") as e:
        bridge("llama-bpe", "fixed").new_matcher('%llguidance {}\nstart: %json {"type": "no-such-type"}')
    assert "\n" not in str(e.value)


# -- isolation ------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_native_crash_fails_that_input_only(tmp_path: Path) -> None:
    write_notebook(tmp_path, "crash", "import os\nos.abort()")
    st = run.execute("crash", "x", out_root=tmp_path / "r", results_dir=tmp_path / "res", notebooks_dir=tmp_path)
    assert st["status"] == "failed" and "kernel died" in st["error"], st
    assert json.loads((tmp_path / "res" / "crash" / "x.json").read_text())["status"] == "failed"


@pytest.mark.slow
def test_a_run_past_the_time_limit_is_stopped(tmp_path: Path) -> None:
    write_notebook(tmp_path, "slow", "import time\ntime.sleep(60)")
    st = run.execute(
        "slow", "x", out_root=tmp_path / "r", results_dir=tmp_path / "res", timeout=3, notebooks_dir=tmp_path
    )
    assert st["status"] == "failed" and st["error"].startswith("Timeout"), st
    assert st["seconds"] < 50


def test_an_interrupted_write_leaves_the_previous_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from llgbridge import paths

    target = tmp_path / "census.csv"
    target.write_text("previous\n")

    def interrupted(src: str, dst: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(paths.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        paths.write_atomic(target, "new\n" * 1000)
    assert target.read_text() == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["census.csv"]


# -- GGUF fuzzing ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_fuzzed_fixtures_never_hang_or_escape(tmp_path: Path) -> None:
    mutants = gguf_fuzz.fuzz(n=60, seed=0, progress=False)
    outcomes = {m.outcome for m in mutants}
    assert outcomes <= {"ok", "error", "crash"}, [
        (m.path.name, m.outcome, m.message) for m in mutants if m.outcome not in ("ok", "error", "crash")
    ]
    assert all("\n" not in m.message for m in mutants)


def test_a_timeout_raised_inside_a_cell_is_named_as_itself(tmp_path: Path) -> None:
    """Only nbclient's own time limit is "a cell ran past the per-input time limit"; a TimeoutError
    that a cell raises (a server that stopped answering) was once reported as that limit too."""
    write_notebook(tmp_path, "sock", "raise TimeoutError('timed out')")
    st = run.execute("sock", "x", out_root=tmp_path / "r", results_dir=tmp_path / "res", notebooks_dir=tmp_path)
    assert (st["status"], st["error"]) == ("failed", "TimeoutError: timed out")


def test_an_input_replaced_while_its_analysis_ran_is_not_recorded(tmp_path: Path) -> None:
    """The input's sha256 was taken when the result was written: a file replaced mid-run gave the old
    file's result under the new file's sha256, current by every check. The hash is the one taken
    when the file was loaded, and a result whose input changed since is refused in one line."""
    import shutil

    from llgbridge import nb
    from llgbridge.analyses.census import compute as census

    mine = tmp_path / "ggml-vocab-mine.gguf"
    shutil.copy(vocab_path("bert-bge"), mine)
    v = nb.load_vocab(Input.make("mine", str(mine)))
    payload = census.run_census(v).to_json()
    shutil.copy(vocab_path("llama-spm"), mine)  # another vocab's bytes, while the analysis "ran"
    params = {"input": Input.make("mine", str(mine)).param()}
    with pytest.raises(InputError, match="changed while the analysis ran"):
        nb.write_result(str(tmp_path / "res"), "census", "mine", payload, params)
    assert not (tmp_path / "res" / "census" / "mine.json").exists()
