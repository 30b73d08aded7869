"""Other engines on llama.cpp (issue 46): each library's own bridge, judged as the bridges are."""

from __future__ import annotations

import pandas as pd

from ...report.data import PageData, takes_page_data
from ...report.prose import prose
from ...report.table import Cell, Section, Table, int_columns, vocab_key
from . import findings
from .compute import ENGINES, LEFT_OUT

# the table's columns, in its order (engines.csv keeps every column the results hold)
SHOWN = {
    "bug_a": "A: wrong bytes",
    "bug_b": "B: its tokenize's text",
    "bug_c": "C: control-token text",
    "bug_end": "end token inside a string",
    "control_admitted": "control token admitted at its text",
    "other_bytes": "other bytes",
    "fffd": "U+FFFD",
    "special_text": "control with text",
    "empty": "held empty",
    "missing": "missing",
    "collapsed": "collapsed",
    "allowed_illegal": "leak: illegal allowed",
    "legal_masked": "leak: legal masked",
    "forced_ok": "forced: spells it",
}


def engine_rows(ok: list[dict]) -> pd.DataFrame:
    """Every engine row of every result, by vocab (the suite's order) then engine (the registry's)."""
    order = {e.name: i for i, e in enumerate(ENGINES)}
    df = pd.DataFrame([row for r in ok for row in r["rows"]])
    df["error"] = df["error"].fillna("") if "error" in df else ""
    # a column an engine's rows have and another's lack reads as "" in both
    for col in ("bug_end", "control_admitted", "bug_b_mechanism", "control_error", "special_error"):
        df[col] = df[col].fillna("") if col in df else ""
    if "same_as" in df:  # only where a run named such an engine: engines.csv gains no empty column
        df["same_as"] = df["same_as"].fillna("")
    df["_e"] = df.engine.map(lambda n: order.get(n, len(order)))
    df = df.sort_values(["vocab", "_e"], kind="stable", key=vocab_key)
    return int_columns(df.drop(columns="_e").reset_index(drop=True))


def with_same_as(df: pd.DataFrame) -> pd.DataFrame:
    """`df` and, last, one row for each engine whose table is a bridge the suite audits (`same_as`)
    that no result ran, for every vocab, from the registry: nothing of it is measured. The page's
    table only: a row of no vocab in engines.csv would be read as a vocab (a page of its own)."""
    same = [
        {"vocab": "every vocab", "engine": e.name, "version": e.version, "same_as": e.same_as}
        for e in ENGINES
        if e.same_as and e.name not in set(df.engine)
    ]
    return pd.concat([df, pd.DataFrame(same)]).fillna({"error": "", "same_as": ""}).reset_index(drop=True)


def _cell(col: str, r: pd.Series) -> Cell:
    if col == "forced_ok":
        good = r.get("forced_not_prefix") == 0 and bool(r.get("forced_output_ok"))
        return Cell("yes" if good else "no", "ok" if good else "bad")
    v = r.get(col)
    if col.startswith("bug_"):
        return Cell(v, "bad" if v == "yes" else "ok")
    if col == "control_admitted":
        # a vocab without a printable control token has no probe: the cell is empty
        return Cell("" if v == "" else ("yes" if v else "no"), "bad" if v is True else "ok")
    return Cell(v, "bad" if v else "ok")


def view(df: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for _, r in df.iterrows():
        row = {"vocab": r.vocab, "engine": r.engine}
        if r.get("same_as"):
            row["error"] = Cell(f"token table: {r['same_as']}", "")
        elif r["error"]:
            row["error"] = Cell(r["error"], "bad")
        else:
            row.update({name: _cell(col, r) for col, name in SHOWN.items()})
        rows.append(row)
    return pd.DataFrame(rows).fillna("")


def summary(df: pd.DataFrame) -> list[dict]:
    """Per engine: its version, how many vocabs show each bug's class, and the faults."""
    out = []
    for e in ENGINES:
        mine = df[df.engine == e.name]
        ran = mine[mine.error == ""]
        out.append(
            {
                "engine": e,
                "version": ", ".join(sorted(set(mine.version))) or e.version,
                "n": len(ran),
                "a": list(ran[ran.bug_a == "yes"].vocab) if len(ran) else [],
                "b": list(ran[ran.bug_b == "yes"].vocab) if len(ran) else [],
                "c": list(ran[ran.bug_c == "yes"].vocab) if len(ran) else [],
                "c_mask": list(ran[ran.control_admitted == True].vocab) if len(ran) else [],  # noqa: E712
                "end": list(ran[ran.bug_end == "yes"].vocab) if len(ran) else [],
                "b_why": sorted({f"{v}: {m}" for v, m in zip(ran.vocab, ran.bug_b_mechanism) if m}) if len(ran) else [],
                "leaks": list(ran[ran.allowed_illegal > 0].vocab) if len(ran) else [],
                "faults": [f"{v}: {err}" for v, err in zip(mine.vocab, mine.error) if err],
                # a question the library refused, its other figures measured
                "refused": [
                    f"{v}: {what}: {err}"
                    for what, col in (("bug C's literal", "special_error"), ("the control probe", "control_error"))
                    for v, err in zip(ran.vocab, ran[col])
                    if err
                ]
                if len(ran)
                else [],
            }
        )
    return out


@takes_page_data
def engines_section(res: PageData) -> Section | None:
    ok, _ = res.load("engines")
    if not ok:
        return None
    df = engine_rows(ok)
    sec = Section("engines", "Other engines on llama.cpp: their own bridges from the same vocabs", notebook="engines")
    limits = sorted({r["limit_s"] for r in ok})
    sec.claim, sec.text = prose("engines", engines=summary(df), left_out=LEFT_OUT, limits=limits)
    # the reproducers are code: Markdown of their own, not the prose's wrapped lines
    sec.text += "\n\nThe findings, each with its reproducer (the library's own calls) and its upstream thread:\n\n"
    sec.text += findings.markdown()
    sec.views.append(Table(view(with_same_as(df))))
    sec.raw_table("engines", df)
    return sec
