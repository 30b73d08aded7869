"""The other engines end to end (issue 46): each library's own logits processor, judged by bytes."""

from __future__ import annotations

import pandas as pd

from ...report.data import PageData, takes_page_data
from ...report.prose import prose
from ...report.table import Cell, Section, Table, int_columns, vocab_key
from ..engines.compute import ENGINES

# a real model's text varies across CPUs of one kind (generate.MatrixRow.row): its tokens and texts
# stay in the result files, not in the committed table
TEXT_COLUMNS = ("tokens", "output", "text")
# how an engine is asked, where it is not llama-cpp-python's logits_processor
VIA = {"llama.cpp GBNF": "through llama-server (upstream build, a plain GBNF grammar to /completion)"}


def e2e_rows(ok: list[dict]) -> pd.DataFrame:
    """Every row of every result: synthetic models first, then by vocab, model, engine, case."""
    order = {e.name: i for i, e in enumerate(ENGINES)}
    df = pd.DataFrame([row for r in ok for row in r["rows"]])
    # content_match: only llama-server's rows (the GBNF sampler's) have the server's own content
    for col in ("error", "content_match", *TEXT_COLUMNS):
        df[col] = df[col].fillna("") if col in df else ""
    df["_e"] = df.engine.map(lambda n: order.get(n, len(order)))
    df["_s"] = ~df.synthetic.astype(bool)
    df = df.sort_values(["_s", "vocab", "model", "_e", "case"], kind="stable", key=vocab_key)
    for col in TEXT_COLUMNS:
        df.loc[df._s, col] = ""
    return int_columns(df.drop(columns=["_e", "_s"]).reset_index(drop=True))


def view(df: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for r in df.itertuples():
        cls = {"ok": "ok", "violates": "bad", "error": "bad"}.get(r.outcome, "")
        rows.append(
            {
                "model": r.model,
                "engine": r.engine,
                "case": r.case,
                "outcome": Cell(r.outcome, cls),
                "real bytes": r.output,
                "library's text": r.text,
                "same": "" if r.outcome == "error" and not r.tokens else ("yes" if r.agree else "no"),
                "server's content": r.content_match,
                "cause": r.error,
            }
        )
    return pd.DataFrame(rows)


def summary(df: pd.DataFrame) -> list[dict]:
    """Per engine: its outcomes, and the rows whose library text is not the real bytes."""
    out = []
    for e in ENGINES:
        mine = df[df.engine == e.name]
        counts = {k: int((mine.outcome == k).sum()) for k in ("ok", "violates", "error")}
        counts["disagrees"] = int((mine.outcome == "judge disagrees").sum())
        causes = sorted({c for c in mine.error if c})
        differ = mine[(mine.agree == False) & (mine.n_tokens.fillna(0) > 0)]  # noqa: E712 - a column
        out.append(
            {
                "engine": e.name,
                "n": len(mine),
                **counts,
                "causes": causes,
                "differ": len(differ),
                "via": VIA.get(e.name, ""),
            }
        )
    return out


@takes_page_data
def engines_e2e_section(res: PageData) -> Section | None:
    ok, _ = res.load("engines_e2e")
    if not ok:
        return None
    df = e2e_rows(ok)
    sec = Section(
        "engines_e2e", "Other engines end to end: their own logits processors, judged by bytes", notebook="engines_e2e"
    )
    settings = sorted({(r["temperature"], r["seed"], r["max_tokens"], r["limit_s"]) for r in ok})
    sec.claim, sec.text = prose("engines_e2e", engines=summary(df), settings=settings)
    sec.views.append(Table(view(df)))
    sec.raw_table("engines_e2e", df)
    return sec
