"""Forced-mask test (guide 5.1, 7.2): following a one-literal grammar, step by step."""

from __future__ import annotations

import json

import pandas as pd

from ... import guide
from ...report.data import PageData, takes_page_data
from ...report.prose import prose
from ...report.table import (
    GUIDE_VOCABS,
    REPAIRED,
    Cell,
    Section,
    Table,
    cell_value,
    first_words,
    group_rows,
    guide_order,
    matched,
    result_rows,
    shows,
)
from ...show import show_list, show_text


@takes_page_data
def forced_section(res: PageData) -> Section | None:
    ok, _ = res.load("forced")
    if not ok:
        return None
    df = result_rows(ok)
    order = guide_order(list(df.vocab.unique()))

    def cell(v: str, b: str) -> tuple[str, str]:
        row = df[(df.vocab == v) & (df.bridge == b)]
        if row.empty or pd.isna(row.iloc[0].get("allowed")):
            return "", ""
        r = row.iloc[0]
        good = r["not_prefix"] == 0 and bool(r["output_ok"])
        return (
            f"{'ok' if good else 'FAILS'}, {r['allowed']} allowed: {show_list(r['pieces'])}",
            "good" if good else "bad",
        )

    def pieces(v: str, b: str) -> list[str] | None:
        p = cell_value(df, v, b, "pieces")
        return sorted(json.loads(p)) if p else None

    rows, twins = [], []
    for v in order:
        (up, up_c), (fx, fx_c) = cell(v, "upstream"), cell(v, "fixed")
        g = guide.FORCED.get(v)
        err = cell_value(df, v, "upstream", "error") or ""
        fx_cls = REPAIRED if up_c == "bad" and fx_c == "good" else ("bad" if fx_c == "bad" else "ok")
        mark = ""
        if g:  # guide 7.2 lists the allowed pieces as a multiset: compare them so, duplicates included
            mark = (
                "✓"
                if [pieces(v, "upstream"), pieces(v, "fixed")] == [sorted(p.decode() for p in side) for side in g]
                else "✗"
            )
        rows.append(
            {
                "vocab": v,
                "without fix": Cell(up, shows(up_c == "bad")),
                "with fix": Cell(fx, fx_cls),
                "guide 7.2: without / with": " / ".join(", ".join(show_text(p.decode()) for p in side) for side in g)
                if g
                else "",
                "match": Cell(mark, matched(mark)),
                "llguidance's error without the fix": Cell(first_words(err, 45), "bad" if err else ""),
            }
        )
        # two allowed tokens that spell the same bytes (the guide's "h" twice): name their ids
        allowed = {r["vocab"]: r.get("allowed", {}) for r in ok}.get(v, {}).get("fixed", [])
        seen: dict[str, list[int]] = {}
        for a in allowed:
            seen.setdefault(a["piece"], []).append(a["token"])
        twins += [{"vocab": v, "piece": p, "ids": ids} for p, ids in seen.items() if len(ids) > 1]
    sec = Section("forced", "Forced-mask test (guide 5.1, 7.2)", notebook="forced")
    sec.claim, sec.text = prose("forced", literals=sorted({r["literal"] for r in ok}), twins=twins)
    sec.views.append(Table(group_rows(pd.DataFrame(rows), keep=frozenset(GUIDE_VOCABS))))
    sec.raw_table("forced", df)
    return sec
