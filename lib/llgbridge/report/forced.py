"""Forced-mask test (guide 5.1, 7.2): following a one-literal grammar, step by step."""

from __future__ import annotations

import pandas as pd

from .. import guide
from ..show import show_list, show_text
from .data import Results, takes_results
from .prose import prose
from .table import Cell, Section, Table, cell_value, guide_order, result_rows, shows


@takes_results
def forced_section(res: Results) -> Section | None:
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
        return f"{'ok' if good else 'FAILS'}, {r['allowed']} allowed: {show_list(r['pieces'])}", "good" if good else "bad"

    rows = []
    for v in order:
        (up, up_c), (fx, fx_c) = cell(v, "upstream"), cell(v, "fixed")
        g = guide.FORCED.get(v)
        err = cell_value(df, v, "upstream", "error") or ""
        fx_cls = "fixed" if up_c == "bad" and fx_c == "good" else ("bad" if fx_c == "bad" else "ok")
        rows.append({"vocab": v, "without fix": Cell(up, shows(up_c == "bad")), "with fix": Cell(fx, fx_cls),
                     "guide: without": ", ".join(show_text(p.decode()) for p in g[0]) if g else "",
                     "guide: with": ", ".join(show_text(p.decode()) for p in g[1]) if g else "",
                     "llguidance's error without the fix": Cell(err, "bad" if err else "")})
    sec = Section("forced", "Forced-mask test (guide 5.1, 7.2)", notebook="forced")
    sec.claim, sec.text = prose("forced", literals=sorted({r["literal"] for r in ok}))
    sec.views.append(Table(pd.DataFrame(rows)))
    sec.raw_table("forced", df)
    return sec
