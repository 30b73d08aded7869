"""The abort classifier (`native.causes`) on a vocab built as llama.cpp's converter builds RWKV's.

`convert_hf_to_gguf.py` (`_set_vocab_rwkv_world`) writes `tokenizer.ggml.model = rwkv`, token 0
`<s>` CONTROL, then the world vocab's tokens as escaped text, all NORMAL, and sets EOT to 261,
whose text is "\\n\\n". The vocab here is the world vocab's first 261 tokens (ids 1-256 are the
single bytes, 257-261 `\\t\\t`, `\\t\\n`, `\\t `, `\\n\\t`, `\\n\\n`, as in
rwkv_vocab_v20230424.txt), enough for llama.cpp's own test to spell every string byte by byte.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import pytest

from llgbridge.analyses.native import compute as native
from llgbridge.analyses.native.causes import classify
from llgbridge.vocab import Vocab

_why = native.unavailable()
pytestmark = pytest.mark.skipif(bool(_why), reason=f"native build unavailable: {_why}")


def rwkv_vocab(path: Path, eot: int = 261) -> Path:
    tokens = [b"<s>"] + [repr(bytes([b]))[2:-1].encode() for b in range(256)]
    tokens += [repr(t)[2:-1].encode() for t in (b"\t\t", b"\t\n", b"\t ", b"\n\t", b"\n\n")]
    w = gguf.GGUFWriter(str(path), "rwkv6")
    w.add_tokenizer_model("rwkv")
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.CONTROL] + [gguf.TokenType.NORMAL] * (len(tokens) - 1))
    w.add_eot_token_id(eot)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_rwkvs_end_token_is_text_the_grammar_admits(tmp_path: Path) -> None:
    path = rwkv_vocab(tmp_path / "rwkv-head.gguf")
    v = Vocab(path, "rwkv-head")
    assert (v.eot, v.token_to_piece(261, special=True)) == (261, b"\n\n")
    run = native.run_test("shipped", "fixed", path)
    assert run.exit_code == 134 and "incorrectly matched" in run.failure, run
    rule, cause = classify(run, v, v.eot)
    assert rule == "eos_is_text", cause
    assert cause.startswith("tok_eos 261 '\\n\\n' is a text token (NORMAL) the grammar admits after 'f(g(x), h(y, z)'")


def test_the_same_vocab_with_its_end_token_on_control_passes(tmp_path: Path) -> None:
    """The cause, not a coincidence: EOT on the CONTROL token <s> and llama.cpp's test passes.
    (An abort no rule names stays "cause not classified" with its assertion line: test_overrides.)"""
    path = rwkv_vocab(tmp_path / "rwkv-eot-control.gguf", eot=0)
    v = Vocab(path, "rwkv-eot-control")
    run = native.run_test("shipped", "fixed", path)
    assert (run.exit_code, classify(run, v, v.eot)) == (0, ("", "")), run
