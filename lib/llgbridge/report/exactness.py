"""Tokenize exactness and the probe (guide 10, rows 2 and 4)."""

from __future__ import annotations

import ast
from collections import Counter

import pandas as pd

from .data import Results, takes_results
from .prose import prose
from .table import Section, Table, vocab_key


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


@takes_results
def exactness_section(res: Results) -> Section | None:
    ok, _ = res.load("exactness")
    if not ok:
        return None
    key = ["vocab", "bridge"]
    bridges_ = pd.DataFrame([row for r in ok for row in r["bridges"]])
    for analysis, col, name in (("leak", "allowed_illegal", "leak_allowed_illegal"), ("forced", "not_prefix", "forced_not_prefix")):
        got, _ = res.load(analysis)
        rows = pd.DataFrame([row for r in got for row in r["rows"]])
        if not rows.empty and col in rows:
            bridges_ = bridges_.merge(rows[key + [col]].rename(columns={col: name}), on=key, how="left")
            bridges_[name] = bridges_[name].astype("Int64")  # a bridge not built has no count, not NaN
    bridges_ = bridges_.sort_values(key, kind="stable", key=vocab_key).reset_index(drop=True)
    exact = pd.DataFrame([row for r in ok for row in r["exactness"]]).sort_values(key, kind="stable", key=vocab_key).reset_index(drop=True)
    pvx = pd.DataFrame([r["probe_vs_exactness"] for r in ok]).sort_values("vocab", kind="stable", key=vocab_key).reset_index(drop=True)
    n_inputs = sorted({r["n_inputs"] for r in ok})

    def exact_on(bridge: str) -> str:
        b = bridges_[(bridges_.bridge == bridge) & (bridges_.built == True)]  # noqa: E712
        names = sorted(b[b.tokenize_exact_rate == 1.0].vocab)
        return ", ".join(names) if names else "none"

    not_built = bridges_[bridges_.built == False]  # noqa: E712
    misses = pvx[pvx.cell.str.startswith("probe misses")]
    kinds = {r.vocab: witness_kind(r.witness) for r in misses.itertuples()}
    counts = ", ".join(f"{n} {k}" for k, n in sorted(Counter(kinds.values()).items()))
    sec = Section("exactness", "Tokenize exactness and the probe (guide 10, rows 2 and 4)", notebook="exactness")
    sec.claim, sec.text = prose(
        "exactness", n_inputs=n_inputs, exact={b: exact_on(b) for b in ("upstream", "fixed", "sentinel")},
        not_built=[f"{r.vocab} ({r.build_error})" for r in not_built[not_built.bridge == "sentinel"].itertuples()],
        agree=int(pvx.agree.sum()), n_vocabs=len(pvx), kinds=counts,
        misses=[f"{r.vocab} ({r.witness} -> {r.witness_got})" for r in misses.itertuples()])
    sec.views.append(Table(pvx[["vocab", "probe_exact", "failed_probe", "inputs_exact", "inputs_inexact", "cell", "witness", "witness_got"]],
                           "The probe against the inputs"))
    sec.raw_table("bridges", bridges_)
    sec.raw_table("exactness", exact)
    sec.raw_table("probe_vs_exactness", pvx)
    return sec
