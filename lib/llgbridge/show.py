"""Bytes as a reviewer must see them: the one rendering every page, table and notebook uses.

The bugs under review are about a leading space, a newline and bytes that are not UTF-8, which
an HTML table or a Markdown cell would swallow. `show` quotes the text, so a leading or trailing
space stands between the quotes; escapes newlines, tabs and other control characters; and
writes an invalid byte as `\\xNN`. Printable Unicode stays as it is (`'héllo'`, `'你好'`).

    show(b" The")      -> "' The'"
    show(b"1\\n2")      -> "'1\\\\n2'"
    show(b"\\xfe")      -> "'\\\\xfe'"
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

# results keep text columns as UTF-8 with invalid bytes written `\xNN` (backslashreplace);
# these column names hold token pieces, probes, outputs or witnesses
BYTE_COLUMNS = frozenset(
    {
        "piece",
        "detok",
        "failed_probe",
        "got",
        "output",
        "witness",
        "witness_got",
        "text",
        "sample",
        "prefix",
        "next",
        "real piece",
        "in llguidance's table",
    }
)
_SURROGATE = re.compile(r"(?<!\\)\\udc([89a-f][0-9a-f])")


def show(data: bytes) -> str:
    """`data` quoted, with spaces, control characters and invalid bytes visible."""
    text = data.decode("utf-8", "surrogateescape")
    # repr escapes what is not printable; an invalid byte came in as U+DC80..U+DCFF
    return _SURROGATE.sub(lambda m: "\\x" + m[1], repr(text))


def show_text(text: str) -> str:
    """A stored text column (UTF-8, invalid bytes as `\\xNN`) rendered as `show` renders bytes.

    An empty value stays empty: a blank cell means "none", not the empty string.
    """
    if text == "":
        return ""
    raw = re.sub(rb"\\x([0-9a-f]{2})", lambda m: bytes([int(m[1], 16)]), text.encode("utf-8", "surrogatepass"))
    return show(raw)


def show_list(items_json: str) -> str:
    """A JSON list of stored texts (a `pieces` column) as `'a', ' b'`."""
    try:
        items = json.loads(items_json)
    except (TypeError, ValueError):
        return str(items_json)
    return ", ".join(show_text(x) if isinstance(x, str) else str(x) for x in items)


def shown_frame(df: pd.DataFrame) -> pd.DataFrame:
    """A table with its byte-like columns rendered by `show` (blank cells stay blank)."""
    out = df.astype(object).where(df.notna(), "").copy()
    for col in out.columns:
        if col in BYTE_COLUMNS:
            out[col] = [show_text(x) if isinstance(x, str) else x for x in out[col]]
        elif col == "pieces":
            out[col] = [show_list(x) if isinstance(x, str) and x.startswith("[") else x for x in out[col]]
    return out


__all__ = ["show", "show_text", "show_list", "shown_frame", "BYTE_COLUMNS"]
