"""The probe (guide 5.3, 6): where the PR keeps `tokenize_fn`, and what it costs where it does not."""

from __future__ import annotations

import pandas as pd

from ...report.data import PageData, takes_page_data
from ...report.prose import prose
from ...report.table import GUIDE_VOCABS, Cell, Section, Table, group_rows, guide_order, shows, vocab_key


@takes_page_data
def probe_section(res: PageData) -> Section | None:
    ok, _ = res.load("probe")
    if not ok:
        return None
    df = (
        pd.DataFrame([r["probe"] for r in ok]).sort_values("vocab", kind="stable", key=vocab_key).reset_index(drop=True)
    )
    order = guide_order(list(df.vocab))
    view = (
        df.set_index("vocab")
        .loc[order]
        .reset_index()[["vocab", "vocab_type", "tokenize_exact", "failed_probe", "got", "greedy", "byte_forcing"]]
    )
    yes = {True: "yes", False: "no"}
    view = view.assign(
        tokenize_exact=[Cell(yes[bool(e)], shows(not e)) for e in view.tokenize_exact],
        greedy=[Cell(yes[bool(g)], "cost" if g else "") for g in view.greedy],
        byte_forcing=[Cell("kept" if f else "lost", "" if f else "cost") for f in view.byte_forcing],
    )
    sec = Section("probe", "The probe (guide 5.3, 6)", notebook="probe")
    sec.claim, sec.text = prose("probe")
    sec.views.append(Table(group_rows(view, keep=frozenset(GUIDE_VOCABS))))
    sec.raw_table("probe", df)
    return sec
