"""The toy's section of the page."""

from __future__ import annotations

import pandas as pd

from llgbridge.report.data import PageData, takes_page_data
from llgbridge.report.prose import prose
from llgbridge.report.table import Section, Table, vocab_key


@takes_page_data
def toy_section(res: PageData) -> Section | None:
    ok, _ = res.load("toy")
    if not ok:
        return None
    df = pd.DataFrame([row for r in ok for row in r["rows"]]).sort_values("vocab", key=vocab_key, kind="stable")
    sec = Section("toy", "The toy analysis", notebook="toy")
    sec.claim, sec.text = prose("toy", n=len(df))
    sec.views.append(Table(df.reset_index(drop=True)))
    sec.raw_table("toy", df.reset_index(drop=True))
    return sec
