"""The in-place mask apply: what llguidance's own numpy kernel computes, without the copy."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import bridge

from llgbridge.grammars import LEAK_GRAMMAR
from llgbridge.measure import maskpath


@pytest.mark.parametrize("share", [0.001, 0.3, 0.9])
def test_apply_mask_equals_llguidances_kernel(share: float) -> None:
    rng = np.random.default_rng(0)
    n = 32000 + 7  # not a multiple of 32: the last word is partial
    bits = rng.random(((n + 31) // 32) * 32) < share
    words = np.packbits(bits, bitorder="little").view(np.uint32)
    logits = rng.standard_normal(n).astype(np.float32)
    assert np.array_equal(maskpath._old_apply(logits, words), maskpath.apply_mask(logits.copy(), words))


def test_apply_mask_on_a_real_mask_keeps_exactly_the_allowed_tokens() -> None:
    b = bridge("llama-bpe", "fixed")
    m = b.new_matcher(LEAK_GRAMMAR)
    words = m.mask()
    logits = np.zeros(b.vocab.n_tokens, dtype=np.float32)
    maskpath.apply_mask(logits, words)
    assert np.flatnonzero(logits == 0).tolist() == m.allowed()
