"""Leak test (guide 4.4, 7.1): tokens a grammar without whitespace admits at its first position."""

from __future__ import annotations

import pandas as pd

from ... import guide
from ...report.data import PageData, takes_page_data
from ...report.plots import bar_by_bridge, log_axis, on_axis
from ...report.prose import prose
from ...report.table import (
    GUIDE_VOCABS,
    Cell,
    Section,
    Table,
    after_fix,
    cell_value,
    group_rows,
    guide_order,
    matched,
    result_rows,
    shows,
)


@takes_page_data
def leak_section(res: PageData) -> Section | None:
    ok, _ = res.load("leak")
    if not ok:
        return None
    df = result_rows(ok)
    order = guide_order(list(df.vocab.unique()))
    grammars = sorted({r["grammar"] for r in ok})
    rows = []
    for v in order:
        up_s, fx_s = (
            cell_value(df, v, "upstream", "allowed_with_space"),
            cell_value(df, v, "fixed", "allowed_with_space"),
        )
        up_i, fx_i = cell_value(df, v, "upstream", "allowed_illegal"), cell_value(df, v, "fixed", "allowed_illegal")
        g = guide.LEAK.get(v)
        ours = (up_s, fx_s)
        match = "" if not g else ("✓" if tuple(int(x) if x is not None else -1 for x in ours) == g else "✗")
        rows.append(
            {
                "vocab": v,
                "without fix: with a space": Cell(up_s, shows(up_s)),
                "with fix: with a space": Cell(fx_s, after_fix(up_s, fx_s)),
                "guide: without / with": "{} / {}".format(*g) if g else "",
                "match": Cell(match, matched(match)),
                "without fix: illegal": Cell(up_i, shows(up_i)),
                "with fix: illegal": Cell(fx_i, after_fix(up_i, fx_i)),
            }
        )
    bpe = [
        x["piece"]
        for x in next((r["leaked"].get("upstream", []) for r in ok if r["vocab"] == "llama-bpe"), [])
        if x.get("space")
    ]
    sec = Section("leak", "Leak test (guide 4.4, 7.1)", notebook="leak")
    sec.claim, sec.text = prose("leak", grammars=grammars, bpe=bpe)
    sec.views.append(Table(group_rows(pd.DataFrame(rows), keep=frozenset(GUIDE_VOCABS))))
    sec.figure = bar_by_bridge(
        df,
        "allowed_illegal",
        "Tokens allowed at position 0 that the grammar forbids",
        "tokens (log axis; each count printed)",
    )
    sec.figure_caption = on_axis(
        "Read: each bar counts the tokens a bridge allows at the grammar's first position that the truth's mask does "
        "not (log axis, the count printed at the bar); a bridge at 0 on every vocab is named in the title instead of "
        "drawn.",
        log_axis(df, "allowed_illegal"),
    )
    sec.raw_table("leak", df)
    return sec
