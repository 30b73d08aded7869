"""Mask soundness over a grammar battery (guide 10, row 1)."""

from __future__ import annotations

import pandas as pd

from ...report.data import PageData, takes_page_data
from ...report.plots import bar_by_bridge, log_axis, on_axis
from ...report.prose import prose
from ...report.table import Section, Table, names, vocab_key


@takes_page_data
def soundness_section(res: PageData) -> Section | None:
    ok, _ = res.load("soundness")
    if not ok:
        return None
    sound = (
        pd.DataFrame([row for r in ok for row in r["soundness"]])
        .sort_values(["vocab", "bridge"], kind="stable", key=vocab_key)
        .reset_index(drop=True)
    )
    under = sound.groupby("bridge")["under"].sum()
    under_vocabs = {b: sorted(sound[(sound.bridge == b) & (sound.under > 0)].vocab) for b in sound.bridge.unique()}
    sec = Section("soundness", "Mask soundness over a grammar battery (guide 10, row 1)", notebook="soundness")
    sec.claim, sec.text = prose(
        "soundness",
        under={b: int(under.get(b, 0)) for b in ("upstream", "fixed", "sentinel")},
        fixed_under=under_vocabs.get("fixed", []),
    )
    per_bridge = [
        {
            "bridge": b,
            "allowed but illegal": int(g.under.sum()),
            "on vocabs": names(sorted(g[g.under > 0].vocab)),
            "legal but masked": int(g.over.sum()),
            "of which forcing narrowed": int(g.over_collapsed.sum()),
            "matcher errors": int(g.errors.sum()),
        }
        for b, g in sound.groupby("bridge", sort=False)
    ]
    sec.views.append(Table(pd.DataFrame(per_bridge), "Over the whole battery, per bridge"))
    sec.views.append(
        Table(
            sound[
                ["vocab", "bridge", "forcing", "steps", "under", "over", "over_collapsed", "stop_disagree", "errors"]
            ],
            "Per vocab and bridge",
            collapsed=True,
        )
    )
    sec.figure = bar_by_bridge(
        sound,
        "under",
        "Under-constraint over the grammar battery (allowed but illegal)",
        "(step, token) pairs (log axis; each count printed)",
        steps="steps",
    )
    sec.figure_caption = on_axis(
        "Read: per vocab, the (step, token) pairs each bridge allows that the grammar forbids, along every walk of the "
        "battery (log axis); a bridge at 0 everywhere is named in the title, and a bar marked with its steps covered "
        "is a walk the matcher died on (upstream's bug B), so its count is a floor.",
        log_axis(sound, "under"),
    )
    sec.raw_table("soundness", sound)
    return sec
