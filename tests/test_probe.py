"""The probe (guide 5.1, 5.3, 6): the PR's verdict, the tokenizer state behind it, and what the
fixed bridge makes of it. Figures are the guide's (5.1: `"The"` -> `[450] ' The'` on llama-spm)."""

from __future__ import annotations

import pytest
from conftest import bridge, vocab

from llgbridge import probe


@pytest.mark.parametrize(
    "name, exact, failed, got",
    [("llama-spm", False, b"The", b" The"), ("llama-bpe", True, None, None)],
)
def test_probe_verdict(name: str, exact: bool, failed: bytes | None, got: bytes | None) -> None:
    r = probe.probe_tokenize_exact(vocab(name))
    assert (r.exact, r.failed_probe, r.got) == (exact, failed, got)
    row = probe.probe_row(vocab(name))
    assert (row["tokenize_exact"], row["greedy"], row["byte_forcing"]) == (exact, not exact, exact)


def test_tokenize_cases_show_the_space_prefix() -> None:
    cases = {(c.text, c.add_special): c for c in probe.tokenize_cases(vocab("llama-spm"), [b"The"])}
    assert cases[(b"The", False)].tokens == [450] and cases[(b"The", False)].pieces == [b" The"]
    assert cases[(b"The", True)].tokens == [1, 450]
    assert not cases[(b"The", False)].exact
    cases = {(c.text, c.add_special): c for c in probe.tokenize_cases(vocab("llama-bpe"), [b"The"])}
    assert cases[(b"The", False)].exact


@pytest.mark.parametrize("name, greedy", [("llama-spm", True), ("llama-bpe", False)])
def test_fixed_engages_greedy_exactly_when_the_probe_fails(name: str, greedy: bool) -> None:
    b = bridge(name, "fixed")
    assert (b.greedy, b.forcing) == (greedy, not greedy)
    assert b.probe is not None and b.probe.exact is not greedy
