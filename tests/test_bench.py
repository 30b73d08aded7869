"""The C census loop of `make bench` agrees with the Python census, token for token counts."""
from __future__ import annotations

import subprocess

from conftest import vocab
from llgbridge import bench, census
from llgbridge.paths import VOCABS


def test_c_loop_agrees_with_python_census() -> None:
    binary = bench.compile_c()
    names = ["llama-spm", "llama-bpe", "bert-bge"]
    out = subprocess.run([str(binary), *(str(VOCABS / f"ggml-vocab-{n}.gguf") for n in names)], capture_output=True, text=True, check=True)
    got = bench.parse(out.stdout)
    for n in names:
        c = census.run_census(vocab(n))
        line = got[n]
        assert (line.n_tokens, line.differing, line.lost) == (c.n_tokens, c.differing, c.lost_leading_space)
