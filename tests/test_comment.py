"""The Markdown files render on GitHub as written: `pr-comment.md` (the review as one comment) and
`pr-review-tables.md` (every table), checked with GitHub's own parser, cmark-gfm (`cmarkgfm`,
with the table, strikethrough, autolink and tagfilter extensions GitHub enables).

What GitHub does, hand-checked with cmarkgfm (DESIGN.md): a `<eos>` or `</s>` outside a code span
is HTML and vanishes, and an unescaped `|` splits a table cell, inside a code span too. Rendered
in cmark's safe mode, raw HTML becomes `<!-- raw HTML omitted -->`, so counting that marker finds
it; a table row's cells are counted in the source, where GitHub drops or pads a row that has more
or fewer than its header.
"""

from __future__ import annotations

import re
from pathlib import Path

import cmarkgfm
import pandas as pd
import pytest

from llgbridge.paths import REPORTS
from llgbridge.report import comment as C
from llgbridge.report import gfm, md_table

RAW = "<!-- raw HTML omitted -->"
_SEP = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")


def _cells(row: str) -> int:
    return len(re.split(r"(?<!\\)\|", row.strip()[1:-1]))


def table_shapes(md: str) -> list[tuple[int, int, str]]:
    """(line, cells, header's cells) of every table row whose cell count is not its header's."""
    bad, lines, fenced, i = [], md.split("\n"), False, 0
    while i < len(lines):
        if lines[i].startswith("```"):
            fenced = not fenced
        if not fenced and lines[i].startswith("|") and i + 1 < len(lines) and _SEP.match(lines[i + 1]):
            want, j = _cells(lines[i]), i + 2
            while j < len(lines) and lines[j].startswith("|"):
                if _cells(lines[j]) != want:
                    bad.append((j + 1, _cells(lines[j]), want))
                j += 1
            i = j
            continue
        i += 1
    return bad


def render(md: str) -> str:
    return cmarkgfm.github_flavored_markdown_to_html(md)


def test_a_token_with_a_pipe_or_angle_brackets_stays_in_its_cell() -> None:
    """Bug C's literal and a SentencePiece end token, as the tables hold them: each row keeps its
    header's two cells, and GitHub shows the bytes, not HTML."""
    df = pd.DataFrame(
        {
            "vocab": ["llama-bpe", "llama-spm"],
            "literal": ["say <|eot_id|> now", "say </s> now"],
            "output": ["say ", "a|b `x`"],
        }
    )
    md = md_table(df)
    assert table_shapes(md) == []
    html = render(md)
    assert RAW not in html
    assert "say &lt;|eot_id|&gt; now" in html and "say &lt;/s&gt; now" in html
    assert "<code>'a|b `x`'</code>" in html  # bytes in a code span: the pipe and the backticks kept


def test_prose_keeps_special_token_text_visible() -> None:
    """A sentence that names a special token outside a code span (the verdict's bug C line)."""
    html = render(gfm.prose('`say </s> now` stops at </s>: the sampler allows only ["<eos>"]'))
    assert RAW not in html and "stops at &lt;/s&gt;" in html and "[&quot;&lt;eos&gt;&quot;]" in html
    assert "<code>say &lt;/s&gt; now</code>" in html


@pytest.mark.parametrize("name", ["pr-comment.md", "pr-review-tables.md"])
def test_the_committed_markdown_renders_cleanly_on_github(name: str) -> None:
    md = (REPORTS / name).read_text(encoding="utf-8")
    assert table_shapes(md) == []
    assert RAW not in render(md)


def test_the_pr_comment_is_one_short_comment_that_stands_alone() -> None:
    """At most `LIMIT` characters (a GitHub comment holds 65,536); opens with what was tested (a
    rebuild, not the PR's branch), then the recommendation, which approves only on condition that the
    same checks pass on the branch; its only links are absolute (it is pasted, not read beside the
    repository)."""
    md = (REPORTS / "pr-comment.md").read_text(encoding="utf-8")
    assert len(md) <= C.LIMIT
    first, second = [line for line in md.splitlines() if line and not line.startswith("#")][:2]
    assert first.startswith("**What was tested.** This suite's rebuild of the PR") and "not its branch" in first
    assert second.startswith("**Recommendation: ")
    if second.startswith("**Recommendation: approve"):
        assert "once the same checks pass on the PR's own branch" in second
    hrefs = re.findall(r'href="([^"]*)"', render(md))
    assert hrefs and all(h.startswith("https://") for h in hrefs)


def test_the_comment_and_the_tables_name_the_same_recommendation(tmp_path: Path) -> None:
    md = (REPORTS / "pr-comment.md").read_text(encoding="utf-8")
    tables = (REPORTS / "pr-review-tables.md").read_text(encoding="utf-8")
    call = re.search(r"\*\*Recommendation: ([^*]+)\.\*\*", md)
    assert call and f"**Recommendation: {call[1]}.**" in tables
