"""Markdown that GitHub renders as written: the escaping `pr-review-tables.md` and `pr-comment.md` go
through, so a token's text stays text.

GitHub's Markdown (cmark-gfm with the table, strikethrough, autolink and tagfilter extensions)
reads `<eos>` or `</s>` outside a code span as HTML and drops it ("say <|eot_id|> now" shows as
"say  now"), and splits a table cell at every unescaped `|`, inside a code span too. So:

- a table cell holding a value (not prose) is a code span when it is bytes (a piece, an output:
  spaces and `<...>` kept as they are), else plain text with Markdown's punctuation escaped;
- prose the report writes (sentences, notes, the verdict) keeps its code spans; outside them `<`
  and `>` become entities, and in a table cell every `|` is escaped;
- a code span is fenced with one backtick more than the longest run inside it;
- a value from an input (a token's text, a file name, a parameter, a server's answer) set in a
  sentence outside a code span is `inline`: nothing in it can open a code span, a link, an image
  or an autolink, on GitHub or on the HTML page (issue 48, break 7). Everything else it holds is
  left as written, so an ordinary value reads the same.

The HTML page renders its own copy of the same prose through mistune, which escapes HTML itself;
`inline` and `code_span` serve both (the prose is the same Markdown), the others the Markdown files only.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# a code span, by CommonMark's backtick-run rule; a backtick `inline` escaped opens none
_CODE = re.compile(r"(?<![\\`])(`+)(.+?)(?<!`)\1(?!`)", re.S)
_PUNCT = re.compile(r"([\\`*\[\]<>|~])")
_LONE_UNDERSCORE = re.compile(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
# a backslash CommonMark reads as an escape: the one before ASCII punctuation
_ESCAPING = re.compile(r"\\(?=[!-/:-@\[-`{-~])")
# `](`, `][` or `]:` makes brackets a link, an image or a link's definition; `[x]` alone stays text
_LINKISH = re.compile(r"\]\s*[(\[:]")
# an autolink's start: `<scheme:` (CommonMark), `scheme://` and `www.` (GitHub's extension)
_SCHEME = re.compile(r"(?i)((?:(?<=<)|(?<![A-Za-z0-9+.-]))[a-z][a-z0-9+.-]{1,31}):(?=//|[^\s<>]*>)")
_WWW = re.compile(r"(?i)\bwww\.")


def code_span(text: str) -> str:
    """`text` as one inline code span, whatever backticks it holds."""
    runs = [len(m) for m in re.findall(r"`+", text)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = (
        " "
        if text.startswith("`") or text.endswith("`") or (text.startswith(" ") and text.endswith(" ") and text.strip())
        else ""
    )
    return f"{fence}{pad}{text}{pad}{fence}"


def plain(text: str) -> str:
    """A value as plain Markdown text: every character that could start markup escaped."""
    text = _PUNCT.sub(r"\\\1", text.replace("&", "&amp;"))
    return _LONE_UNDERSCORE.sub(r"\\_", text)


def inline(text: object) -> str:
    """A value from an input, set in a sentence outside a code span: one line, and no backtick,
    bracket pair or URL in it can start markup; an ordinary value comes back as it was."""
    s = _ESCAPING.sub(r"\\\\", " ".join(str(text).split("\n")))
    s = s.replace("`", "\\`")
    if _LINKISH.search(s):
        s = s.replace("[", "\\[").replace("]", "\\]")
    return _WWW.sub(lambda m: m[0][:3] + "\\.", _SCHEME.sub(r"\1\\:", s))


def _outside_code(md: str, fix: Callable[[str], str]) -> str:
    out, last = [], 0
    for m in _CODE.finditer(md):
        out.append(fix(md[last : m.start()]))
        out.append(m.group(0))
        last = m.end()
    out.append(fix(md[last:]))
    return "".join(out)


def prose(md: str) -> str:
    """Prose the report wrote (Markdown with **bold** and `code`): no raw HTML outside its code spans."""
    return _outside_code(md, lambda s: s.replace("<", "&lt;").replace(">", "&gt;"))


def prose_blocks(md: str) -> str:
    """A whole document: `prose` on every line outside fenced code blocks and tables (whose cells
    `md_table` has escaped already)."""
    out, fenced = [], False
    for line in md.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
            out.append(line)
        elif fenced or line.startswith("|"):
            out.append(line)
        else:
            out.append(prose(line))
    return "\n".join(out)


def cell_prose(md: str) -> str:
    """Prose inside a table cell: as `prose`, every `|` escaped (code spans too) and one line."""
    return prose(" ".join(md.split("\n"))).replace("|", "\\|")


def cell_code(text: str) -> str:
    """A bytes value inside a table cell: one code span, its `|` escaped."""
    return code_span(text).replace("|", "\\|") if text else ""


def cell_plain(text: str) -> str:
    return plain(" ".join(str(text).split("\n")))


__all__ = ["code_span", "inline", "plain", "prose", "prose_blocks", "cell_prose", "cell_code", "cell_plain"]
