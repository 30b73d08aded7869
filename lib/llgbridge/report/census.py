"""Byte-diff census (guide 4.2, 4.3): which tokens reach llguidance with other bytes than their piece."""

from __future__ import annotations

import pandas as pd

from .. import guide
from ..models import REAL_MODELS
from ..palette import BRIDGES as PALETTE
from .data import Results, takes_results
from .plots import pyplot, svg
from .prose import prose
from .table import Cell, Section, Table, guide_order, matched, piece_text, shows, vocab_key


def census_figure(df: pd.DataFrame) -> str:
    """Bug A per vocab on a log axis of %, so BPE's 0.02% shows beside SentencePiece's 51%; each
    bar carries its count and share, and a vocab with none says 0 at the axis."""
    plt = pyplot()
    d = df.set_index("vocab").loc[guide_order(list(df.vocab))].reset_index()
    share = d["differing"] / d["n_tokens"] * 100
    fig, ax = plt.subplots(figsize=(9, 0.26 * len(d) + 1.4))
    ys = [-i for i in range(len(d))]
    lo = 0.005
    ax.barh(ys, [p if p > 0 else 0 for p in share], left=0, color=PALETTE["upstream"])
    for y, p, n, t in zip(ys, share, d["differing"], d["n_tokens"]):
        ax.text(max(p, lo), y, f" {n} of {t} ({p:.2g}%)" if n else " 0", va="center", fontsize=9)
    ax.set_yticks(ys, list(d["vocab"]))
    ax.set_xscale("log")
    ax.set_xlim(lo, 600)  # room for the labels of the 50% bars
    ax.set_xticks([0.01, 0.1, 1, 10, 100], ["0.01%", "0.1%", "1%", "10%", "100%"])
    ax.set_xlabel("tokens whose bytes in upstream's table differ from their piece (log axis; count at the bar's end)", fontsize=10)
    ax.set_title("Bug A: wrong token bytes per vocab fixture", fontsize=11)
    plt.tight_layout()
    out = svg(fig)
    plt.close(fig)
    return out


@takes_results
def census_section(res: Results) -> Section | None:
    ok, _ = res.load("census")
    if not ok:
        return None
    df = pd.DataFrame([r["summary"] for r in ok]).sort_values("vocab", kind="stable", key=vocab_key).reset_index(drop=True)
    # a real model's vocab is marked with its file (loaded vocab-only, like the fixtures)
    df.insert(1, "real_model", df.vocab.map(lambda v: REAL_MODELS[v].shown if v in REAL_MODELS else ""))
    for col in ("bos", "eos"):  # ids, absent on some vocabs: integers with blanks, not floats
        df[col] = df[col].astype("Int64")
    by_vocab = {r["vocab"]: r for r in ok}
    order = guide_order(list(by_vocab))
    sec = Section("census", "Byte-diff census (guide 4.2, 4.3)", notebook="census")
    sec.claim, sec.text = prose("census")
    t43 = []
    for v in order:
        s = by_vocab[v]["summary"]
        g = guide.CENSUS.get(v)
        match = "" if not g else ("✓" if (s["differing"], s["lost_leading_space"], s["n_tokens"]) == g else "✗")
        t43.append({"vocab fixture": REAL_MODELS[v].shown if v in REAL_MODELS else f"ggml-vocab-{v}.gguf", "differing tokens": Cell(f"{s['differing']} / {s['n_tokens']}", shows(s["differing"])),
                    "of which lost a leading space": s["lost_leading_space"], "guide: differing": f"{g[0]} / {g[2]}" if g else "",
                    "guide: lost a space": g[1] if g else "", "match": Cell(match, matched(match))})
    t43 = pd.DataFrame(t43)
    sec.views.append(Table(t43, "Guide table 4.3: tokens whose bytes in upstream's table are wrong"))
    t42 = pd.DataFrame([{
        "vocab": v, "vocab type": by_vocab[v]["summary"]["vocab_type"], "pre-tokenizer": by_vocab[v]["summary"]["pre"],
        "add_space_prefix (KV)": by_vocab[v]["summary"]["add_space_prefix_kv"],
        "space prefix observed": by_vocab[v]["summary"]["add_space_prefix_observed"],
        "by lstrip": by_vocab[v]["summary"]["by_lstrip"], "by clean_spaces": by_vocab[v]["summary"]["by_clean_spaces"],
        "by both": by_vocab[v]["summary"]["by_lstrip_and_clean_spaces"], "unexplained": by_vocab[v]["summary"]["by_other"],
    } for v in order])
    sec.views.append(Table(t42, "Guide table 4.2, measured: which mechanism corrupts which vocab",
                           note="The guide's 4.2 is per vocab type; `clean_spaces` is set per pre-tokenizer, so it is measured here per fixture."))
    ex_rows = []
    for v in order:
        diffs = {d["token"]: d for d in by_vocab[v]["diffs"]}
        if v in guide.EXAMPLES:
            tok, piece, detok = guide.EXAMPLES[v]
            d = diffs.get(tok)
            ex_rows.append({"vocab": v, "tok": tok, "token_to_piece": piece_text(d["piece"]) if d else "",
                            "detokenize": piece_text(d["detok"]) if d else "", "mechanism": d["mechanism"] if d else "(no difference)",
                            "guide": f"{piece_text(piece.decode())} / {piece_text(detok.decode())}"})
        elif by_vocab[v]["diffs"]:
            d = by_vocab[v]["diffs"][0]
            ex_rows.append({"vocab": v, "tok": d["token"], "token_to_piece": piece_text(d["piece"]), "detokenize": piece_text(d["detok"]),
                            "mechanism": d["mechanism"], "guide": ""})
    sec.views.append(Table(pd.DataFrame(ex_rows), "Examples: the guide's tokens for its vocabs, the lowest differing id elsewhere"))
    sec.figure = census_figure(df)
    sec.raw_table("census", df)
    return sec
