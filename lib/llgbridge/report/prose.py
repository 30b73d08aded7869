"""A section's prose, from its template fragment beside its module (`section.py`, `census.md.j2`).

A fragment holds Markdown in two blocks, `claim` (the guide's claim, one sentence) and `text`
(ours), written wrapped for reading: a line break inside a paragraph is a space on the page, a
blank line starts a paragraph, and a line that starts with `- ` an item. The values come from
the section's code, already computed; the fragment only says them.
"""

from __future__ import annotations

import re
from typing import Any

from .templating import count, environment, of


def unwrap(text: str) -> str:
    """Wrapped lines joined into paragraphs and items (see the module's note)."""
    paragraphs = []
    for para in re.split(r"\n\s*\n", text.strip()):
        lines: list[str] = []
        for line in para.splitlines():
            line = line.strip()
            # an item and a table row start lines of their own (a table row, and the row before it)
            if lines and not line.startswith(("- ", "|")) and not lines[-1].startswith("|"):
                lines[-1] += " " + line
            else:
                lines.append(line)
        paragraphs.append("\n".join(lines))
    return "\n\n".join(p for p in paragraphs if p)


def blocks(section: str, only: tuple[str, ...] = (), **values: Any) -> dict[str, str]:
    """The blocks of `section`'s fragment (every one, or `only` these), rendered with `values`;
    a note under a table is a block of its own."""
    t = environment().get_template(f"{section}.md.j2")
    ctx = t.new_context(values)
    return {name: unwrap("".join(render(ctx))) for name, render in t.blocks.items() if not only or name in only}


def prose(section: str, **values: Any) -> tuple[str, str]:
    """(claim, text) of `section`, its fragment rendered with `values`."""
    got = blocks(section, only=("claim", "text"), **values)
    return got.get("claim", ""), got.get("text", "")


__all__ = ["blocks", "count", "of", "prose", "unwrap"]
