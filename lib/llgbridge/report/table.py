"""The report's tables: a `Table` renders the same rows as HTML and as Markdown, so the two pages
cannot disagree; a `Cell` carries its colour; and the helpers every section shares (the guide's
vocab order, a result's rows as a frame)."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .. import guide
from ..models import REAL_MODELS
from ..native import LLG_PINNED as NATIVE_PIN
from ..native import version_key
from ..show import BYTE_COLUMNS, show_text
from ..show import shown_frame

GUIDE_VOCABS = list(guide.CENSUS)  # the guide's own vocabs come first in its tables
PR_BASE = "030ebb55"  # the upstream commit the PR is based on (guide, first lines)


def guide_order(vocabs: list[str]) -> list[str]:
    """The guide's vocabs first, then the other fixtures, then the real models' vocabs."""
    first = [v for v in GUIDE_VOCABS if v in vocabs]
    real = [v for v in REAL_MODELS if v in vocabs]
    return first + sorted(v for v in vocabs if v not in first and v not in real) + real


def vocab_key(col: pd.Series) -> pd.Series:
    """A `sort_values` key: the real models' vocabs after every fixture, in models.REAL_MODELS
    order (other columns as they are)."""
    if col.name != "vocab":
        return col
    rank = {v: i for i, v in enumerate(REAL_MODELS)}
    return col.map(lambda v: (1, f"{rank[v]:04d}") if v in rank else (0, v))


def int_columns(df: pd.DataFrame) -> pd.DataFrame:
    """Counts stay integers where a row (a bridge not built) leaves them blank, not floats."""
    for col in df.columns:
        vals = df[col].dropna()
        if df[col].dtype.kind == "f" and len(vals) and all(float(x).is_integer() for x in vals):
            df[col] = df[col].astype("Int64")
    return df


@dataclass(frozen=True)
class Cell:
    """A table value with its colour: `cls` is a class of the page's style (`bad`, `fixed`, `ok`,
    `cost`), so a cell's colour travels with its value wherever the row goes."""

    value: Any
    cls: str = ""


def shows(bug: object) -> str:
    """A bug's cell: `bad` where it shows, `ok` where not."""
    return "bad" if bug else "ok"


def after_fix(before: object, after: object) -> str:
    """A cell after the fix: `bad` where the bug still shows, `fixed` where it showed before and
    no longer does, `ok` where it never did."""
    return "bad" if after else ("fixed" if before else "ok")


def matched(mark: str) -> str:
    """A "matches the guide" cell (`✓`, `✗` or blank)."""
    return "fixed" if mark == "✓" else ("bad" if mark else "")


def values(df: pd.DataFrame) -> pd.DataFrame:
    """`df` with every `Cell` replaced by its value (what the Markdown and the CSV show)."""
    if not any(isinstance(x, Cell) for col in df.columns for x in df[col]):
        return df
    return df.map(lambda x: x.value if isinstance(x, Cell) else x)


def colours(df: pd.DataFrame) -> list[list[str]]:
    """Each cell's class, "" where it has none."""
    return [[x.cls if isinstance(x, Cell) else "" for x in row] for row in df.itertuples(index=False)]


def md_table(df: pd.DataFrame) -> str:
    return shown_frame(values(df)).to_markdown(index=False, disable_numparse=True) + "\n"


PROSE_COLUMNS = frozenset({"the results"})
LINK_COLUMNS = frozenset({"evidence"})  # a relative link to the table or section that shows it


def html_table(df: pd.DataFrame, links: dict[str, str] | None = None) -> str:
    """One table for a page: byte-like cells in a monospaced, space-keeping cell; a `Cell`'s
    class colours it; `links` maps a first-column value to a URL."""
    classes = colours(df)
    shown = shown_frame(values(df))
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in shown.columns)
    body = []
    for i, row in enumerate(shown.itertuples(index=False)):
        cells = []
        for j, (col, val) in enumerate(zip(shown.columns, row)):
            cls = [classes[i][j]] if classes[i][j] else []
            if col in BYTE_COLUMNS or col == "pieces":
                cls.append("b")
            text = html.escape(str(val))
            if col in PROSE_COLUMNS:  # sentences with **bold** and `code`, written by the report itself
                text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
                text = re.sub(r"`(.+?)`", r"<code>\1</code>", text)
            if col in LINK_COLUMNS and val:
                text = f"<a href='{html.escape(str(val))}'>{text}</a>"
            if j == 0 and links and str(val) in links:
                text = f"<a href='{html.escape(links[str(val)])}'>{text}</a>"
            attr = f" class='{' '.join(cls)}'" if cls else ""
            cells.append(f"<td{attr}>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    # a wide table scrolls inside its own box, never the page (at 1400 px)
    return f"<div class='tw'><table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"


@dataclass
class Table:
    """A table as both pages show it: `df` is what a reader sees, its `Cell`s coloured."""

    df: pd.DataFrame
    caption: str = ""
    name: str = ""  # the CSV's name, for a raw table
    note: str = ""  # a sentence under the table (Markdown)
    links: dict[str, str] | None = None

    @property
    def html(self) -> str:
        return html_table(self.df, self.links)

    @property
    def markdown(self) -> str:
        return md_table(self.df)

    @property
    def csv(self) -> str:
        return values(self.df).to_csv(index=False, lineterminator="\n")


@dataclass
class Section:
    key: str  # the analysis, and the page anchor
    title: str
    claim: str = ""  # the guide's claim, one sentence
    text: str = ""  # ours (Markdown)
    views: list[Table] = field(default_factory=list)
    raw: list[Table] = field(default_factory=list)  # written as tables/NAME.csv, shown collapsed
    figure: str = ""  # inline SVG (HTML only)
    notebook: str = ""  # the analysis whose executed notebooks to link
    notebooks: list[tuple[str, str]] = field(default_factory=list)  # (vocab, href), filled in by build()
    # files written beside the page (path under the output folder -> text): a figure of timings
    # goes here and is shown by reference, so the page itself stays byte-identical between runs
    assets: dict[str, str] = field(default_factory=dict)

    def raw_table(self, name: str, df: pd.DataFrame) -> None:
        self.raw.append(Table(df, name=name))


def result_rows(ok: list[dict[str, Any]], key: str = "rows") -> pd.DataFrame:
    df = pd.DataFrame([row for r in ok for row in r[key]])
    return int_columns(df.sort_values(["vocab", "bridge"], kind="stable", key=vocab_key).reset_index(drop=True))


def piece_text(stored: str) -> str:
    """A stored piece shown, the empty piece included (`''`): here it is a value, not a blank."""
    return show_text(stored) or "''"


def cell_value(df: pd.DataFrame, vocab: str, bridge: str, col: str) -> Any:
    row = df[(df.vocab == vocab) & (df["bridge"] == bridge)]
    if row.empty or col not in row:
        return None
    val = row.iloc[0][col]
    return None if pd.isna(val) else val


def names(vocabs: list[str]) -> str:
    return ", ".join(vocabs) if vocabs else "none"


def overridden_note(df: pd.DataFrame) -> str:
    """For a table with a row of an input loaded with key overrides (`models.overridden`): a
    sentence saying what that input is and why, so it is said wherever its rows appear; else ""."""
    from ..models import overridden

    said = []
    for name, m in overridden().items():
        hit = any(col in df and df[col].map(lambda x, n=name: str(getattr(x, "value", x)).startswith((n, m.file + " --override-kv"))).any()
                  for col in ("vocab", "input", "model"))
        if hit:
            said.append(f"`{name}` is {m.why}.")
    return " ".join(said)


def first_words(text: object, n: int = 70) -> str:
    t = str(text or "")
    return t if len(t) <= n else t[:n] + "…"


def pinned_rows(r: dict[str, Any]) -> list[dict[str, Any]]:
    """A native result's rows on llguidance as llama.cpp pins it, where it was built, else the venv's."""
    have = {row.get("llguidance") for row in r["rows"]}
    want = NATIVE_PIN if NATIVE_PIN in have else max(have, key=version_key)
    return [row for row in r["rows"] if row.get("llguidance") == want]


__all__ = ["Cell", "shows", "after_fix", "matched", "Table", "Section", "md_table", "html_table", "values", "guide_order", "vocab_key", "int_columns",
           "result_rows", "piece_text", "cell_value", "names", "first_words", "pinned_rows", "overridden_note", "GUIDE_VOCABS", "PR_BASE"]
