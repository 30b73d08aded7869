"""The GGUF walk before every load: the compiled one (`_llamacall.scan_strings`) answers as the
Python one, which it replaced where it is built, on every file the report reads and on the files
the loader would abort on (a repeated token, a NUL byte) or that stop short."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from gguf import Keys
from helpers import write_vocab

from llgbridge import gguf_meta
from llgbridge.errors import InputError
from llgbridge.paths import MODELS, VOCABS

COMPILED = gguf_meta._scan


def _both(f: Path) -> tuple[Any, Any]:
    """`read_kv(f)` (or its error's text) through the compiled walk, then through the Python one."""
    out = []
    for walk in (COMPILED, None):
        gguf_meta._scan = walk
        try:
            out.append(gguf_meta.read_kv(f))
        except InputError as e:
            out.append(str(e))
        finally:
            gguf_meta._scan = COMPILED
    return out[0], out[1]


def test_the_compiled_walk_is_built() -> None:
    assert COMPILED is not None  # make setup builds it: without it every load walks in Python


@pytest.mark.parametrize(
    "path",
    sorted(VOCABS.glob("ggml-vocab-*.gguf")) + sorted(MODELS.glob("*.gguf")),
    ids=lambda p: p.name,
)
def test_both_walks_read_every_input_alike(path: Path) -> None:
    compiled, python = _both(path)
    assert compiled == python


def _tokens(change: Callable[[list[bytes]], list[bytes]]) -> Callable[[str, Any], Any]:
    return lambda k, v: change(list(v)) if k == Keys.Tokenizer.LIST else v


# each a token list llama.cpp's loader aborts on, and the tokens the check must name
CHANGES = {
    "repeat": (_tokens(lambda v: v[:300] + [v[301]] + v[301:]), ((301, 300), None)),
    # two repeats: the first in token order is named, with the token it repeats
    "two repeats": (_tokens(lambda v: v[:20] + [v[900]] + v[21:500] + [v[10]] + v[501:]), ((500, 10), None)),
    "nul": (_tokens(lambda v: v[:300] + [b"a\0b"] + v[301:]), (None, 300)),
    "empty token twice": (_tokens(lambda v: v[:5] + [b""] + v[6:7] + [b""] + v[8:]), ((7, 5), None)),
}


@pytest.mark.parametrize("name", CHANGES)
def test_both_walks_name_the_same_repeated_or_nul_token(tmp_path: Path, name: str) -> None:
    change, (duplicate, nul) = CHANGES[name]
    f = write_vocab(tmp_path / "v.gguf", change)
    compiled, python = _both(f)
    assert compiled == python
    toks = compiled[0][Keys.Tokenizer.LIST]
    assert (toks.duplicate, toks.nul) == (duplicate, nul)


def test_a_file_cut_inside_its_arrays_gives_the_same_line_either_way(tmp_path: Path) -> None:
    src = VOCABS / "ggml-vocab-gpt-2.gguf"  # the token list, then the merges: cuts land in both
    data = src.read_bytes()
    for cut in (len(data) // 4, len(data) // 2, len(data) * 3 // 4):
        f = tmp_path / f"cut{cut}.gguf"
        f.write_bytes(data[:cut])
        compiled, python = _both(f)
        assert compiled == python and isinstance(compiled, str) and "truncated GGUF" in compiled
