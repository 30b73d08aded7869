"""Tokenize exactness and the probe (guide 10, rows 2 and 4)."""

from __future__ import annotations

import ast
import re
from collections import Counter
from typing import Any

import pandas as pd

from ...report.data import PageData, takes_page_data
from ...report.prose import blocks
from ...report.table import Section, Table, vocab_key
from ...show import show_text


def witness_text(witness: str) -> str:
    """A witness (stored as the repr of bytes, `b'\\xfe'`) as the stored text every byte column
    holds (UTF-8, an invalid byte as `\\xNN`), so the page shows it as bytes, not as Python."""
    if not witness:
        return ""
    try:
        data = ast.literal_eval(witness)
    except (ValueError, SyntaxError):
        return witness
    return data.decode("utf-8", "backslashreplace") if isinstance(data, bytes) else str(data)


_BYTES_LITERAL = re.compile(r"b'(?:[^'\\]|\\.)*'" + r'|b"(?:[^"\\]|\\.)*"')


def shown_inputs(minimized: object) -> object:
    """The `minimized` column (Python reprs of bytes joined by " | ") as the page shows bytes."""
    if not isinstance(minimized, str) or not minimized:
        return minimized
    return ", ".join(show_text(witness_text(x)) or "''" for x in _BYTES_LITERAL.findall(minimized))


def witness_kind(witness: str) -> str:
    """What a probe-vs-exactness witness (the repr of bytes) is: special-token text (`b'<|eot_id|>'`),
    invalid UTF-8, or other text."""
    data = ast.literal_eval(witness)
    if data.startswith(b"<") and data.endswith(b">"):
        return "special"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "invalid UTF-8"
    return "text"


KEY = ["vocab", "bridge"]
# other analyses' counts joined onto each built bridge: (analysis, its column, the name here)
JOINED_COUNTS = (
    ("leak", "allowed_illegal", "leak_allowed_illegal"),
    ("forced", "not_prefix", "forced_not_prefix"),
)


def bridges_frame(res: PageData, ok: list[dict[str, Any]]) -> pd.DataFrame:
    """Every (vocab, bridge) the exactness analysis built, with the leak's and forced's counts."""
    bridges_ = pd.DataFrame([row for r in ok for row in r["bridges"]])
    for analysis, col, name in JOINED_COUNTS:
        got, _ = res.load(analysis)
        rows = pd.DataFrame([row for r in got for row in r["rows"]])
        if not rows.empty and col in rows:
            bridges_ = bridges_.merge(rows[KEY + [col]].rename(columns={col: name}), on=KEY, how="left")
            bridges_[name] = bridges_[name].astype("Int64")  # a bridge not built has no count, not NaN
    return bridges_.sort_values(KEY, kind="stable", key=vocab_key).reset_index(drop=True)


def exactness_frame(ok: list[dict[str, Any]]) -> pd.DataFrame:
    """Every (vocab, bridge)'s exactness on the inputs, the minimized inputs shown as bytes."""
    exact = (
        pd.DataFrame([row for r in ok for row in r["exactness"]])
        .sort_values(KEY, kind="stable", key=vocab_key)
        .reset_index(drop=True)
    )
    if "minimized" in exact:
        exact = exact.assign(minimized=[shown_inputs(m) for m in exact.minimized])
    return exact


def probe_frame(ok: list[dict[str, Any]]) -> pd.DataFrame:
    """The probe's verdict against the inputs', per vocab, as stored (witnesses as reprs of bytes)."""
    return (
        pd.DataFrame([r["probe_vs_exactness"] for r in ok])
        .sort_values("vocab", kind="stable", key=vocab_key)
        .reset_index(drop=True)
    )


def witnesses_shown(pvx: pd.DataFrame) -> pd.DataFrame:
    """The inputs are stored as Python's repr of bytes: shown, and written, as every byte column is."""
    return pvx.assign(
        **{
            c: [witness_text(w) if isinstance(w, str) else w for w in pvx[c]]
            for c in ("witness", "witness_got", "failed_probe", "text_witness")
            if c in pvx
        }
    )


def exact_on(bridges_: pd.DataFrame, bridge: str) -> str:
    """The vocabs on which `bridge` was built and its tokenize_fn is exact on every input."""
    b = bridges_[(bridges_.bridge == bridge) & (bridges_.built == True)]  # noqa: E712
    names = sorted(b[b.tokenize_exact_rate == 1.0].vocab)
    return ", ".join(names) if names else "none"


def exactness_said(
    ok: list[dict[str, Any]], bridges_: pd.DataFrame, stored: pd.DataFrame, pvx: pd.DataFrame
) -> dict[str, str]:
    """The section's fragment, rendered: `stored` is the probe frame with its witnesses as stored
    (their kind is read from the bytes), `pvx` the same with them shown."""
    kinds = {r.vocab: witness_kind(r.witness) for r in stored[stored.cell.str.startswith("probe misses")].itertuples()}
    not_built = bridges_[bridges_.built == False]  # noqa: E712
    misses = pvx[pvx.cell.str.startswith("probe misses")]
    return blocks(
        "exactness",
        n_inputs=sorted({r["n_inputs"] for r in ok}),
        exact={b: exact_on(bridges_, b) for b in ("upstream", "fixed", "sentinel")},
        not_built=[f"{r.vocab} ({r.build_error})" for r in not_built[not_built.bridge == "sentinel"].itertuples()],
        agree=int(pvx.agree.sum()),
        n_vocabs=len(pvx),
        kinds=", ".join(f"{n} {k}" for k, n in sorted(Counter(kinds.values()).items())),
        misses=[f"{r.vocab} ({show_text(r.witness)} -> {show_text(r.witness_got)})" for r in misses.itertuples()],
    )


def probe_summary(pvx: pd.DataFrame) -> pd.DataFrame:
    """The probe's verdict against the inputs': how many vocabs fall in each (probe, inputs) cell."""
    return pd.DataFrame(
        [
            {
                "the probe says": "exact" if pe else "not exact",
                "the inputs say": kind,
                "vocabs": len(g),
                "which": ", ".join(g.vocab),
            }
            for (pe, kind), g in pvx.assign(kind=pvx.cell).groupby(["probe_exact", "kind"], sort=False)
        ]
    )


@takes_page_data
def exactness_section(res: PageData) -> Section | None:
    """Guide 10, rows 2 and 4: is each bridge's tokenize_fn exact on the inputs, and does the PR's
    probe say so."""
    ok, _ = res.load("exactness")
    if not ok:
        return None
    bridges_ = bridges_frame(res, ok)
    stored = probe_frame(ok)
    pvx = witnesses_shown(stored)
    sec = Section("exactness", "Tokenize exactness and the probe (guide 10, rows 2 and 4)", notebook="exactness")
    said = exactness_said(ok, bridges_, stored, pvx)
    sec.claim, sec.text, sec.more = said["claim"], said["text"], said["more"]
    shown = pvx[
        ["vocab", "probe_exact", "failed_probe", "inputs_exact", "inputs_inexact", "cell", "witness", "witness_got"]
    ].assign(probe_exact=["yes" if x else "no" for x in pvx.probe_exact])
    sec.views.append(Table(probe_summary(pvx), "The probe's verdict against the inputs'", collapsed=True))
    sec.views.append(Table(shown, "Per vocab, with the shortest input that shows a disagreement", collapsed=True))
    sec.raw_table("bridges", bridges_)
    sec.raw_table("exactness", exactness_frame(ok))
    sec.raw_table("probe_vs_exactness", pvx)
    return sec
