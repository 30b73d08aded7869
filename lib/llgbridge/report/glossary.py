"""The words this report uses that the guide does not, each said once in plain words: the page's
glossary, and what a table's header or a sentence means by them."""

from __future__ import annotations

import re
from functools import cache

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
        "nospecial, failclosed, ownbridge",
        "candidate patches beside the PR (`patches/candidates/0004`, `0005`, `0007`): `tokenize_fn` without "
        "special-token parsing (C), only end-of-generation tokens after a mask error (D), and llguidance's own "
        "llama.cpp bridge in place of the PR's probe (the alternative design).",
    ),
    (
        "synthetic model",
        "random weights around a vocab fixture's real tokenizer: its text is noise, its tokenization real.",
    ),
    (
        "stand-in",
        "an input loaded with one of llama.cpp's key overrides to stand for models no package ships (Gemma 3 270M "
        "with `add_space_prefix` forced on, for TinyLlama and Mistral); never counted among the shipped vocabs.",
    ),
    (
        "ctest entries",
        "the runs of llama.cpp's `test-grammar-llguidance` that its CMake registers: one on llama-bpe before the PR, "
        "and the one on llama-spm the PR adds.",
    ),
    (
        "fast-forward tokens",
        "tokens llguidance can emit without sampling where the grammar forces bytes "
        "(`llg_matcher_compute_ff_tokens`); they need `tokenize_fn`, so the greedy fallback loses them.",
    ),
    (
        "item limit",
        "llguidance's `step_max_items` (50000), the most Earley items one mask may take; over it the mask fails.",
    ),
    (
        "question N",
        'the Nth of the guide\'s section 10, "what a reviewer should push on"; a bare number such as 4.5 is a '
        "section of the guide.",
    ),
)


def anchor(entry: str) -> str:
    """The glossary entry's id on the page."""
    return "g-" + re.sub(r"[^a-z0-9]+", "-", entry.lower()).strip("-")


@cache
def terms() -> list[tuple[str, str]]:
    """(a term as it appears in prose, its entry's anchor), longest first so "bug C" is not
    taken for a part of something longer."""
    out = []
    for entry, _ in GLOSSARY:
        for t in entry.split(", "):
            out.append((t.split(" (")[0], anchor(entry)))
    return sorted(out, key=lambda x: -len(x[0]))


_TAG = re.compile(r"(<[^>]+>)")


def gloss(html: str) -> str:
    """`html` with the first use of each glossary term linked to its entry: only in text, never
    inside a link or a code span."""
    parts, inside, seen = _TAG.split(html), 0, set()
    for i, part in enumerate(parts):
        if part.startswith("<"):
            if re.match(r"<(a|code)\b", part):
                inside += 1
            elif re.match(r"</(a|code)>", part):
                inside -= 1
            continue
        if inside:
            continue
        spans: list[tuple[int, int, str]] = []  # (start, end, anchor) of the first use of each term here
        for term, ref in terms():  # longest first: a shorter term never claims part of a longer one's use
            if ref in seen:
                continue
            for m in re.finditer(rf"(?<![\w-]){re.escape(term)}(?![\w-])", part):
                if all(m.end() <= a or m.start() >= b for a, b, _ in spans):
                    spans.append((m.start(), m.end(), ref))
                    seen.add(ref)
                    break
        for a, b, ref in sorted(spans, reverse=True):
            part = f'{part[:a]}<a class="term" href="#{ref}">{part[a:b]}</a>{part[b:]}'
        parts[i] = part
    return "".join(parts)


__all__ = ["GLOSSARY", "anchor", "gloss", "terms"]
