"""Byte-diff census (guide 4.2, 4.3): which tokens reach llguidance with other bytes than their piece."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ... import guide
from ...catalogue import REAL_MODELS
from ...palette import BRIDGES as PALETTE
from ...report.data import PageData, takes_page_data
from ...report.plots import on_axis, pyplot, svg
from ...report.prose import prose
from ...report.table import (
    GUIDE_VOCABS,
    Cell,
    Section,
    Table,
    group_rows,
    guide_order,
    matched,
    piece_text,
    shows,
    vocab_key,
)


def census_log(df: pd.DataFrame) -> bool:
    """Whether the census figure's axis is a log one: only where some vocab has a wrong byte."""
    return bool((df["differing"] > 0).any())


def census_figure(df: pd.DataFrame) -> str:
    """Bug A per vocab on a log axis of %, so BPE's 0.02% shows beside SentencePiece's 51%; each
    bar carries its count and share, and a vocab with none says 0 at the axis."""
    plt = pyplot()
    d = df.set_index("vocab").loc[guide_order(list(df.vocab))].reset_index()
    share = d["differing"] / d["n_tokens"] * 100
    fig, ax = plt.subplots(figsize=(7, 0.2 * len(d) + 1.1))
    ys = [-i for i in range(len(d))]
    lo = 0.005
    ax.barh(ys, [p if p > 0 else 0 for p in share], left=0, color=PALETTE["upstream"])
    for y, p, n, t in zip(ys, share, d["differing"], d["n_tokens"]):
        label = f"{n} of {t} ({p:.2g}%)" if n else "0"
        if p > 2:  # the axis stops at 100%: a long bar carries its label inside
            ax.text(p / 1.15, y, label, va="center", ha="right", fontsize=8, color="white")
        else:
            ax.text(max(p, lo), y, " " + label, va="center", fontsize=8)
    ax.set_yticks(ys, list(d["vocab"]), fontsize=8)
    log = census_log(df)
    if log:
        ax.set_xscale("log")
        ax.set_xlim(lo, 100)
        ax.set_xticks([0.01, 0.1, 1, 10, 100], ["0.01%", "0.1%", "1%", "10%", "100%"])
    else:  # no wrong byte anywhere (a what-if): nothing for a log axis, where matplotlib would warn
        ax.set_xlim(0, 100)
        ax.set_xticks([0, 50, 100], ["0%", "50%", "100%"])
    ax.set_xlabel(
        on_axis("share of the vocab's tokens with wrong bytes in upstream's table (log axis)", log), fontsize=9
    )
    ax.set_title("Bug A: wrong token bytes per vocab", fontsize=10)
    plt.tight_layout()
    out = svg(fig)
    plt.close(fig)
    return out


CENSUS_CAPTION = (
    "Read: the share of each vocab's tokens that upstream's table gets wrong, on a log axis so that a few in ten "
    "thousand (the space `clean_spaces` drops before `?!.,`) shows beside half of a vocab (the space `lstrip` "
    "drops); a vocab at 0 is unaffected."
)
# where no vocab has a wrong byte (a what-if), the axis is linear and there is no share to set apart
CENSUS_CAPTION_NONE = (
    "Read: the share of each vocab's tokens that upstream's table gets wrong: none here, every bar at 0."
)

T42_NOTE = (
    "The guide's 4.2 is per vocab type; `clean_spaces` is set per pre-tokenizer, so it is measured here per fixture."
)
# table 4.2's columns: (shown, the census summary's key)
T42_COLUMNS = {
    "vocab type": "vocab_type",
    "pre-tokenizer": "pre",
    "add_space_prefix (KV)": "add_space_prefix_kv",
    "space prefix observed": "add_space_prefix_observed",
    "by lstrip": "by_lstrip",
    "by clean_spaces": "by_clean_spaces",
    "by both": "by_lstrip_and_clean_spaces",
    "unexplained": "by_other",
}

ByVocab = dict[str, dict[str, Any]]


def census_frame(ok: list[dict[str, Any]]) -> pd.DataFrame:
    """Every vocab's census summary, one row each (the raw table and the figure's data)."""
    df = (
        pd.DataFrame([r["summary"] for r in ok])
        .sort_values("vocab", kind="stable", key=vocab_key)
        .reset_index(drop=True)
    )
    # a real model's vocab is marked with its file (loaded vocab-only, like the fixtures)
    df.insert(1, "real_model", df.vocab.map(lambda v: REAL_MODELS[v].shown if v in REAL_MODELS else ""))
    for col in ("bos", "eos"):  # ids, absent on some vocabs: integers with blanks, not floats
        df[col] = df[col].astype("Int64")
    return df


def table_43(by_vocab: ByVocab, order: list[str]) -> pd.DataFrame:
    """Guide table 4.3 measured: each vocab's differing tokens beside the guide's counts."""
    t43 = []
    for v in order:
        s = by_vocab[v]["summary"]
        g = guide.CENSUS.get(v)
        match = "" if not g else ("✓" if (s["differing"], s["lost_leading_space"], s["n_tokens"]) == g else "✗")
        t43.append(
            {
                "vocab": v + (" (real model)" if v in REAL_MODELS else ""),
                "differing tokens": Cell(
                    f"{s['differing']}/{s['n_tokens']}" if s["differing"] else "0", shows(s["differing"])
                ),
                "of which lost a leading space": s["lost_leading_space"],
                "guide: differing, lost a space": f"{g[0]}/{g[2]}, {g[1]}" if g else "",
                "match": Cell(match, matched(match)),
            }
        )
    return group_rows(pd.DataFrame(t43), keep=frozenset(GUIDE_VOCABS))


def table_42(by_vocab: ByVocab, order: list[str]) -> pd.DataFrame:
    """Guide table 4.2 measured: per vocab, which mechanism corrupts its tokens."""
    return pd.DataFrame(
        [{"vocab": v, **{shown: by_vocab[v]["summary"][key] for shown, key in T42_COLUMNS.items()}} for v in order]
    )


def example_row(v: str, diffs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """One vocab's example: the guide's token where the guide gives one, else its lowest differing
    id (None where it has none)."""
    if v in guide.EXAMPLES:
        tok, piece, detok = guide.EXAMPLES[v]
        d = {x["token"]: x for x in diffs}.get(tok)
        return {
            "vocab": v,
            "tok": tok,
            "token_to_piece": piece_text(d["piece"]) if d else "",
            "detokenize": piece_text(d["detok"]) if d else "",
            "mechanism": d["mechanism"] if d else "(no difference)",
            "guide": f"{piece_text(piece.decode())} / {piece_text(detok.decode())}",
        }
    if not diffs:
        return None
    d = diffs[0]
    return {
        "vocab": v,
        "tok": d["token"],
        "token_to_piece": piece_text(d["piece"]),
        "detokenize": piece_text(d["detok"]),
        "mechanism": d["mechanism"],
        "guide": "",
    }


def examples(by_vocab: ByVocab, order: list[str]) -> pd.DataFrame:
    """One example token per vocab that has one, in the guide's order."""
    rows = (example_row(v, by_vocab[v]["diffs"]) for v in order)
    return pd.DataFrame([r for r in rows if r is not None])


@takes_page_data
def census_section(res: PageData) -> Section | None:
    """Guide 4.2 and 4.3: per vocab, the tokens whose bytes in upstream's table are wrong, and why."""
    ok, _ = res.load("census")
    if not ok:
        return None
    df = census_frame(ok)
    by_vocab = {r["vocab"]: r for r in ok}
    order = guide_order(list(by_vocab))
    sec = Section("census", "Byte-diff census (guide 4.2, 4.3)", notebook="census")
    sec.claim, sec.text = prose("census")
    sec.views.append(
        Table(table_43(by_vocab, order), "Guide table 4.3: tokens whose bytes in upstream's table are wrong")
    )
    sec.views.append(
        Table(
            table_42(by_vocab, order),
            "Guide table 4.2, measured: which mechanism corrupts which vocab",
            collapsed=True,
            note=T42_NOTE,
        )
    )
    sec.views.append(
        Table(
            examples(by_vocab, order),
            "Examples: the guide's tokens for its vocabs, the lowest differing id elsewhere",
            collapsed=True,
        )
    )
    sec.figure = census_figure(df)
    sec.figure_caption = CENSUS_CAPTION if census_log(df) else CENSUS_CAPTION_NONE
    sec.raw_table("census", df)
    return sec
