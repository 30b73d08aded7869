"""The words this report uses that the guide does not, each said once in plain words: the page's
glossary, and what a table's header or a sentence means by them."""

from __future__ import annotations

GLOSSARY: tuple[tuple[str, str], ...] = (
    ("upstream sampler, fixed sampler", "`common/llguidance.cpp` before the PR, and with the PR applied (`patches/`)."),
    (
        "bridge",
        "the code that hands llama.cpp's vocab to llguidance: a token table (each token's bytes) and a `tokenize_fn`. "
        "`upstream` and `fixed` are the two above; `sentinel` is llguidance's own llama.cpp integration.",
    ),
    (
        "port",
        "this suite's Python copy of a bridge, field for field, driving the real llguidance; checked step by step "
        "against the compiled C++, so its figures are the C++'s.",
    ),
    (
        "truth",
        'the yardstick for "legal": llguidance given every token\'s real bytes (`llama_token_to_piece`) and no '
        "`tokenize_fn`, so its mask is exactly what the grammar allows.",
    ),
    (
        'illegal token ("allowed but illegal")',
        "a token a bridge's mask allows and the truth's does not; \"legal but masked\" is the other way round (byte "
        "forcing narrows masks so by design, counted apart).",
    ),
    (
        "byte forcing",
        "where the grammar admits one continuation, llguidance allows only the token `tokenize_fn` gives for it. "
        "Greedy tokenization (no `tokenize_fn`) turns it off: the mask stays exact, fast-forward tokens are lost.",
    ),
    (
        "walk, step",
        "following a grammar along a string it accepts, token by token; a step is one position, where each bridge's "
        "mask is compared with the truth's. The soundness analysis walks a battery of grammars.",
    ),
    (
        "not a prefix",
        "an allowed token whose real bytes do not spell a prefix of the literal a grammar forces (guide 7.2's check).",
    ),
    (
        "llg error",
        "the line `llama_sampler_llg_apply` logs when llguidance fails and it drops the grammar; only the server's log "
        "has it, never the response.",
    ),
    (
        "bug C, bug D",
        "found beyond the PR: special-token text in a grammar becomes the special token (C); a mask over llguidance's "
        "50000-item limit drops the grammar (D).",
    ),
    (
        "nospecial, failclosed",
        "candidate patches beside the PR (`patches/candidates/0004`, `0005`): `tokenize_fn` without special-token "
        "parsing (C), and only end-of-generation tokens after a mask error (D).",
    ),
    (
        "synthetic model",
        "random weights around a vocab fixture's real tokenizer: its text is noise, its tokenization real.",
    ),
)

__all__ = ["GLOSSARY"]
