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
from ..analyses.native.compute import LLG_PINNED as NATIVE_PIN
from ..analyses.native.compute import version_key
from ..catalogue import REAL_MODELS, overridden
from ..show import BYTE_COLUMNS, show_text, shown_frame
from . import gfm

GUIDE_VOCABS = list(guide.CENSUS)  # the guide's own vocabs come first in its tables
PR_BASE = "030ebb55"  # the upstream commit the PR is based on (guide, first lines)
PR_BRANCH = "llg-spm-tokenize"  # its branch, and its guide's title (the guide gives no PR number)
PR_TITLE = "llguidance token-bytes and tokenize_fn byte-exactness"


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
    """A table value with its colour: `cls` is a class of the page's style (`bad`, `repaired`, `ok`,
    `cost`), so a cell's colour travels with its value wherever the row goes."""

    value: Any
    cls: str = ""


# the page's class (green) for a bug the fix repaired: not "fixed", which names the PR's bridge
# and sampler in every table
REPAIRED = "repaired"


def shows(bug: object) -> str:
    """A bug's cell: `bad` where it shows, `ok` where not."""
    return "bad" if bug else "ok"


def after_fix(before: object, after: object) -> str:
    """A cell after the fix: `bad` where the bug still shows, `repaired` where it showed before and
    no longer does, `ok` where it never did."""
    return "bad" if after else (REPAIRED if before else "ok")


# a finding beyond the PR that is the same before and after it (bugs C and D, the ignored schema):
# not the PR's to fix, so neither "bug shows" (red) nor "repaired" (green)
SAME = "same"


def matched(mark: str) -> str:
    """A "matches the guide" cell (`✓`, `✗` or blank)."""
    return REPAIRED if mark == "✓" else ("bad" if mark else "")


def values(df: pd.DataFrame) -> pd.DataFrame:
    """`df` with every `Cell` replaced by its value (what the Markdown and the CSV show)."""
    if not any(isinstance(x, Cell) for col in df.columns for x in df[col]):
        return df
    return df.map(lambda x: x.value if isinstance(x, Cell) else x)


def colours(df: pd.DataFrame) -> list[list[str]]:
    """Each cell's class, "" where it has none."""
    return [[x.cls if isinstance(x, Cell) else "" for x in row] for row in df.itertuples(index=False)]


PROSE_COLUMNS = frozenset({"the results", "why", "what it means"})  # Markdown the report wrote
LINK_COLUMNS = frozenset({"evidence"})  # a relative link to the table or section that shows it
WRAP_COLUMNS = frozenset(
    {"the PR's test: exit without → with"}
)  # a long cell in a table that otherwise keeps to one line

# a page shows a column by what it holds, in words; the CSV keeps the name a reader can grep
WORDS = {
    "differ_from_sequential": "outcome differs from one request at a time",
    "healthy_after": "/health answers after",
    "inputs_inexact": "inputs not tokenized exactly",
    "inputs_exact": "inputs tokenized exactly",
    "n_only_port": "tokens only the port allows",
    "n_only_cpp": "tokens only the C++ allows",
    "only_port": "only the port allows",
    "only_cpp": "only the C++ allows",
    "only_cpp_pieces": "pieces only the C++ allows",
    "only_port_pieces": "pieces only the port allows",
    "cpp": "the compiled sampler",
    "port": "the port",
    "under": "allowed but illegal",
    "over": "legal but masked",
    "over_collapsed": "of which forcing narrowed",
    "under_steps": "steps allowing an illegal token",
    "over_steps": "steps masking a legal token",
    "stop_disagree": "disagree on stopping",
    "witness": "shortest input that shows it",
    "witness_got": "its tokens' real bytes",
    "probe_exact": "probe says exact",
    "failed_probe": "probe that failed",
    "got": "came back as",
    "tok_eos": "end token id",
    "pr_test_exit": "PR test exit",
    "no_space_bad": "tokens with a space",
    "forced_bad": "tokens not a prefix",
    "no_space_allowed": "allowed (no-space test)",
    "forced_allowed": "allowed (forced test)",
    "pr_test_failure": "PR test failure",
    "pr_test_llg_error": "PR test: first llg error",
    "shipped_test_exit": "test before the PR: exit",
    "shipped_test_failure": "test before the PR: failure",
    "shipped_test_llg_error": "test before the PR: first llg error",
    "diff_jobs": "walks compared",
    "diff_cells": "steps compared",
    "diff_differ": "steps that differ",
    "harness_error": "harness error",
    "allowed_with_space": "allowed with a space",
    "allowed_illegal": "allowed, illegal",
    "legal_masked": "legal, masked",
    "not_prefix": "not a prefix",
    "error_step": "error at step",
    "output_ok": "output right",
    "build_error": "not built because",
    "tokenize_exact": "llama_tokenize exact",
    "byte_forcing": "byte forcing",
    "tokenize_exact_rate": "inputs tokenized exactly",
    "canon_defined": "canonical tokens known",
    "canon_differs": "differs from llama.cpp's tokens",
    "special_failures": "special-token text failures",
    "llg_errors": "llg error lines",
    "error_field": "error field",
    "http_status": "HTTP status",
    "stop_type": "stop type",
    "first_violation": "first token the grammar forbids",
    "sent_as": "sent as",
    "n_tokens": "tokens",
    "compared_tokens": "tokens compared",
    "first_differing_token": "first differing token",
    "port_outcome": "port's outcome",
    "server_outcome": "server's outcome",
    "violating": "what broke",
    "then_allowed": "tokens allowed after",
    "over_limit": "over the limit by",
    "limit_of": "limit of",
    "jsonschema_invalid": "jsonschema rejects",
}


_AUTHORED = re.compile(r"\*\*[^*]+\*\*|`[^`]+`")


def header(col: object) -> str:
    return WORDS.get(str(col), str(col).replace("_", " "))


def md_table(df: pd.DataFrame) -> str:
    """One table in GitHub's Markdown (`gfm`): bytes in code spans, every other value escaped, so a
    `|` or a `<eos>` in a token never splits a cell or becomes HTML."""
    shown = shown_frame(values(df))
    cols = [str(c) for c in shown.columns]

    def cell(col: str, val: object) -> str:
        text = str(val)
        if col in BYTE_COLUMNS or col == "pieces":
            return gfm.cell_code(text)
        # a value the report wrote with **bold** or `code` in it (bench.md's rows) is its Markdown
        return gfm.cell_prose(text) if col in PROSE_COLUMNS or _AUTHORED.search(text) else gfm.cell_plain(text)

    lines = [
        "| " + " | ".join(gfm.cell_plain(header(c)) for c in cols) + " |",
        "|" + "|".join("---" for _ in cols) + "|",
    ]
    lines += ["| " + " | ".join(cell(c, v) for c, v in zip(cols, row)) + " |" for row in shown.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def group_rows(df: pd.DataFrame, key: str = "vocab", keep: frozenset[str] = frozenset()) -> pd.DataFrame:
    """Rows that say the same thing in every other column (values and colours) become one, its
    `key` cell naming them all with their count; rows whose key is in `keep` (the guide's own
    vocabs, set beside the guide's figures) stay apart."""
    if df.empty:
        return df
    others = [c for c in df.columns if c != key]
    groups: dict[object, list[int]] = {}
    for i, row in df.iterrows():
        sig = (
            ("keep", row[key])
            if row[key] in keep
            else tuple((x.value, x.cls) if isinstance(x, Cell) else x for x in row[others])
        )
        groups.setdefault(sig, []).append(i)
    out = []
    for idx in groups.values():
        row = df.loc[idx[0]].to_dict()
        if len(idx) > 1:
            row[key] = (
                f"{len(idx)} vocabs: " + ", ".join(str(df.loc[i, key]) for i in idx)
                if key == "vocab"
                else ", ".join(str(df.loc[i, key]) for i in idx)
            )
        out.append(row)
    return pd.DataFrame(out, columns=df.columns)


def html_table(df: pd.DataFrame, links: dict[str, str] | None = None) -> str:
    """One table for a page: byte-like cells in a monospaced, space-keeping cell; a `Cell`'s
    class colours it; `links` maps a first-column value to a URL."""
    classes = colours(df)
    shown = shown_frame(values(df))
    head = "".join(f"<th>{html.escape(header(c))}</th>" for c in shown.columns)
    body = []
    for i, row in enumerate(shown.itertuples(index=False)):
        cells = []
        for j, (col, val) in enumerate(zip(shown.columns, row)):
            cls = [classes[i][j]] if classes[i][j] else []
            if col in BYTE_COLUMNS or col == "pieces":
                cls.append("b")
            if col in WRAP_COLUMNS:
                cls.append("w")
            text = html.escape(str(val))
            if col in PROSE_COLUMNS:  # sentences with **bold** and `code`, written by the report itself
                text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
                text = re.sub(r"`(.+?)`", r"<code>\1</code>", text)
            if col in LINK_COLUMNS and val:
                text = f"<a href='{html.escape(str(val))}'>{text}</a>"
            if j == 0 and links and str(val) in links:
                text = f"<a href='{html.escape(links[str(val)])}'>{text}</a>"
            elif j == 0 and len(str(val)) > 30:  # a grouped row's list of names wraps in its own width, not the table's
                text = f"<span class='k'>{text}</span>"
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
    collapsed: bool = False  # shown on the page under its caption, closed (the Markdown shows it whole)

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
    figure_caption: str = ""  # one line: what to read from the figure
    more: str = ""  # how it was measured (Markdown): on the page under a closed summary, in the Markdown whole
    notebook: str = ""  # the analysis whose executed notebooks to link
    notebooks: list[tuple[str, str]] = field(default_factory=list)  # (vocab, href), filled in by pages.write_sections
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
    said = []
    for name, m in overridden().items():
        hit = any(
            col in df
            and df[col]
            .map(lambda x, n=name, f=m.file: str(getattr(x, "value", x)).startswith((n, f + " --override-kv")))
            .any()
            for col in ("vocab", "input", "model")
        )
        if hit:  # the short form: the verdict and the input's own page say why at length
            said.append(f"`{name}` (a stand-in): {first_clause(m.why)}.")
    return " ".join(said)


def first_clause(text: str) -> str:
    """`text` up to its first colon outside a code span: a colon inside one (`bool:true`) is the
    value's, and cutting there left an unclosed backtick that ate the rest of the note."""
    for m in re.finditer(r"`[^`]*`|:", text):
        if m.group(0) == ":":
            return text[: m.start()]
    return text


def clip(stored: str, n: int) -> str:
    """A stored generated text as a cell or a sentence quotes it: its first `n` characters shown
    (`show_text`), "…" where cut, and the suite's own note after it ("…[56 more tokens after the first
    violation at token 0]") kept whole, never cut with the text."""
    text, sep, note = str(stored).partition("…[")
    shown = show_text(text[:n]) + ("…" if len(text) > n else "")
    return shown + (f" [{note}" if sep else "")


def first_words(text: object, n: int = 70) -> str:
    t = str(text or "")
    return t if len(t) <= n else t[:n] + "…"


def pinned_rows(r: dict[str, Any]) -> list[dict[str, Any]]:
    """A native result's rows on llguidance as llama.cpp pins it, where it was built, else the venv's."""
    have = {row.get("llguidance") for row in r["rows"]}
    want = NATIVE_PIN if NATIVE_PIN in have else max(have, key=version_key)
    return [row for row in r["rows"] if row.get("llguidance") == want]


__all__ = [
    "Cell",
    "shows",
    "after_fix",
    "matched",
    "SAME",
    "WORDS",
    "header",
    "group_rows",
    "Table",
    "Section",
    "md_table",
    "html_table",
    "values",
    "guide_order",
    "vocab_key",
    "int_columns",
    "result_rows",
    "piece_text",
    "cell_value",
    "names",
    "first_words",
    "pinned_rows",
    "overridden_note",
    "GUIDE_VOCABS",
    "PR_BASE",
]
