"""The one Jinja environment: every template of the suite (the pages, bench's Markdown, each
section's prose fragment) is found and rendered through it, with the same filters.

Templates are found by name in the report's folder, in `llgbridge/templates/` and in each
analysis's package (its `NAME.md.j2`, beside its section). An HTML template (`*.html.j2`) escapes
what it is given; a Markdown one says a value from an input through a filter (`gfm`, `inline`,
`show`, `code`...: issue 48, break 7), never as a bare `{{ x }}` between hand-written backticks.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from ..analyses import ANALYSES
from ..show import show_text
from . import gfm
from .glossary import anchor, gloss
from .table import names, piece_text

HERE = Path(__file__).parent
TEMPLATES = HERE.parent / "templates"


def count(n: int, noun: str) -> str:
    """`n noun`, the noun plural but at one: "1 vocab", "0 vocabs", "3 vocabs"."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def of(k: int, n: int, noun: str) -> str:
    """`k of n nouns`, read naturally at the ends: "none of 3 vocabs", "2 of 19 vocabs"; of one, "no
    vocab" or "the one vocab" (a what-if's page has one input: "none of 1 vocab" read as a slip)."""
    if n == 1:
        return f"no {noun}" if k == 0 else f"the one {noun}"
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


def _folders() -> list[Path]:
    """Where a template is looked for, in this order."""
    return [HERE, TEMPLATES, *(a.folder for a in ANALYSES)]


def _markdown_filters(env: Any) -> None:
    # the pages' HTML from Markdown (the recommendation, a section's prose)
    import jinja2
    import mistune

    md = mistune.create_markdown(escape=True, plugins=["table"])
    env.filters["md"] = lambda s: jinja2.utils.markupsafe.Markup(md(s) if s else "")
    env.filters["md_inline"] = lambda s: jinja2.utils.markupsafe.Markup(
        str(md(s)).strip().removeprefix("<p>").removesuffix("</p>") if s else ""
    )
    env.filters["gfm"] = gfm.prose  # the Markdown files: what GitHub would read as HTML stays text
    env.filters["inline"] = gfm.inline  # a value from an input in a Markdown sentence (issue 48, break 7)
    env.filters["gloss"] = lambda s: jinja2.utils.markupsafe.Markup(gloss(str(s)))
    env.filters["anchor"] = anchor


def _value_filters(env: Any) -> None:
    env.filters["show"] = lambda x: gfm.inline(show_text(x))
    env.filters["piece"] = lambda x: gfm.inline(piece_text(x))  # the empty piece shows as '', not as a blank
    env.filters["code"] = lambda x: gfm.code_span(str(x))
    env.filters["showcode"] = lambda x: gfm.code_span(show_text(x))
    env.filters["piececode"] = lambda x: gfm.code_span(piece_text(x))
    env.filters["names"] = names
    env.filters["count"] = count
    env.filters["of"] = of
    env.filters["quoted"] = quoted


@cache
def environment() -> Any:
    """The environment, made once per process."""
    # jinja2 and mistune load when a page is first drawn, not when a notebook imports a section
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(f) for f in _folders()]),
        autoescape=jinja2.select_autoescape(["html.j2"]),
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    _markdown_filters(env)
    _value_filters(env)
    return env


__all__ = ["count", "environment", "of", "quoted"]
