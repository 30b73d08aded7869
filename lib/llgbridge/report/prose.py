"""A section's prose, from its template fragment beside its module (`census.py`, `census.md.j2`).

A fragment holds Markdown in two blocks, `claim` (the guide's claim, one sentence) and `text`
(ours), written wrapped for reading: a line break inside a paragraph is a space on the page, a
blank line starts a paragraph, and a line that starts with `- ` an item. The values come from
the section's code, already computed; the fragment only says them.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

from ..show import show_text
from . import gfm
from .table import names, piece_text

HERE = Path(__file__).parent


def count(n: int, noun: str) -> str:
    """`n noun`, the noun plural but at one: "1 vocab", "0 vocabs", "3 vocabs"."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def of(k: int, n: int, noun: str) -> str:
    """`k of n nouns`, read naturally at the ends: "none of 1 vocab", "2 of 19 vocabs"."""
    return f"{'none' if k == 0 else k} of {count(n, noun)}"


QUOTED = 60  # characters of a generated text quoted in a sentence


def quoted(text: str) -> str:
    """A stored output as a code span in a sentence: the suite's own tail marker ("…[56 more tokens
    after …]") left out, cut at a word's end with "…" outside the span, "(no text)" when empty."""
    shown = show_text(str(text).split("…[", 1)[0])
    if not shown:
        return "(no text)"
    if len(shown) > QUOTED:
        cut = shown[:QUOTED]
        cut = cut[: cut.rfind(" ")] if " " in cut[QUOTED // 2 :] else cut
        return f"{gfm.code_span(cut)}…"
    return gfm.code_span(shown)


@cache
def _env() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    # a value from an input is said through `gfm` (issue 48, break 7): in a sentence `inline`, in
    # a code span `code_span`, never a bare `{{ x }}` between hand-written backticks
    env.filters["show"] = lambda x: gfm.inline(show_text(x))
    env.filters["piece"] = lambda x: gfm.inline(piece_text(x))  # the empty piece shows as '', not as a blank
    env.filters["code"] = lambda x: gfm.code_span(str(x))
    env.filters["showcode"] = lambda x: gfm.code_span(show_text(x))
    env.filters["piececode"] = lambda x: gfm.code_span(piece_text(x))
    env.filters["names"] = names
    env.filters["count"] = count
    env.filters["of"] = of
    env.filters["quoted"] = quoted
    return env


def unwrap(text: str) -> str:
    """Wrapped lines joined into paragraphs and items (see the module's note)."""
    paragraphs = []
    for para in re.split(r"\n\s*\n", text.strip()):
        lines: list[str] = []
        for line in para.splitlines():
            line = line.strip()
            if lines and not line.startswith("- "):
                lines[-1] += " " + line
            else:
                lines.append(line)
        paragraphs.append("\n".join(lines))
    return "\n\n".join(p for p in paragraphs if p)


def blocks(section: str, only: tuple[str, ...] = (), **values: Any) -> dict[str, str]:
    """The blocks of `section`'s fragment (every one, or `only` these), rendered with `values`;
    a note under a table is a block of its own."""
    t = _env().get_template(f"{section}.md.j2")
    ctx = t.new_context(values)
    return {name: unwrap("".join(render(ctx))) for name, render in t.blocks.items() if not only or name in only}


def prose(section: str, **values: Any) -> tuple[str, str]:
    """(claim, text) of `section`, its fragment rendered with `values`."""
    got = blocks(section, only=("claim", "text"), **values)
    return got.get("claim", ""), got.get("text", "")


__all__ = ["blocks", "count", "of", "prose", "unwrap"]
