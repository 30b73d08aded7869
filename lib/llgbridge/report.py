"""Gather the per-vocab results into the reviewer-facing report.

    python -m llgbridge.report [--results DIR] [--out DIR]

Writes `tables/*.csv`, `pr-review-tables.md` and `index.html` under the output folder
(default `reports/`), each through a temporary name. Tables are sorted and carry no timestamps,
so two runs on the same inputs give the same bytes; run metadata (versions, failed inputs) goes
to `run.json` beside them. Exits 1, naming each failed input, when any run failed.

Each section (census, ...) is a function from the results to tables, markdown and HTML, so a
new analysis adds one section without touching the others.
"""

from __future__ import annotations

import argparse
import ast
import html
import io
import json
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd

from . import guide
from .paths import REPORTS, RESULTS, ROOT, write_atomic, write_json

GUIDE_VOCABS = list(guide.CENSUS)  # the guide's own vocabs come first in its tables


def load_results(results: Path, analysis: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(ok results, failed results) of one analysis, sorted by vocab."""
    ok, failed = [], []
    for p in sorted((results / analysis).glob("*.json")):
        try:
            r = json.loads(p.read_text())
        except ValueError as e:
            failed.append({"notebook": analysis, "vocab": p.stem, "error": f"unreadable result: {e}"})
            continue
        (ok if r.get("status") == "ok" else failed).append(r)
    return ok, failed


def guide_order(vocabs: list[str]) -> list[str]:
    first = [v for v in GUIDE_VOCABS if v in vocabs]
    return first + sorted(v for v in vocabs if v not in first)


def _blank(df: pd.DataFrame) -> pd.DataFrame:
    """Missing values (None, NaN, NA) shown as empty cells."""
    return df.astype(object).where(df.notna(), "")


def md_table(df: pd.DataFrame) -> str:
    return _blank(df).to_markdown(index=False, disable_numparse=True) + "\n"


def html_table(df: pd.DataFrame, title: str = "") -> str:
    """A table for index.html, under an `<h3>` heading when given one."""
    head = f"<h3>{html.escape(title)}</h3>" if title else ""
    return head + _blank(df).to_html(index=False, escape=True)


def svg(fig: Any) -> str:
    """A figure as inline SVG with fixed ids and no date, so the page is byte-stable."""
    import matplotlib

    matplotlib.rcParams["svg.hashsalt"] = "llgbridge"
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight")
    text = buf.getvalue()
    return text[text.index("<svg") :]


@dataclass
class Section:
    title: str
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)  # csv name -> table
    markdown: str = ""
    html: str = ""


# -- census (guide 4.2, 4.3) ----------------------------------------------------------------------
def census_section(results: Path) -> tuple[Section | None, list[dict[str, Any]]]:
    ok, failed = load_results(results, "census")
    if not ok:
        return None, failed
    rows = [r["summary"] for r in ok]
    df = pd.DataFrame(rows).sort_values("vocab", kind="stable").reset_index(drop=True)
    for col in ("bos", "eos"):  # ids, absent on some vocabs: integers with blanks, not floats
        df[col] = df[col].astype("Int64")
    sec = Section("Byte-diff census (guide 4.2, 4.3)", tables={"census": df})
    by_vocab = {r["vocab"]: r for r in ok}
    order = guide_order(list(by_vocab))

    # 4.2: mechanisms per vocab, measured rather than assumed per vocab type
    t42 = pd.DataFrame(
        [
            {
                "vocab": v,
                "vocab type": by_vocab[v]["summary"]["vocab_type"],
                "pre-tokenizer": by_vocab[v]["summary"]["pre"],
                "add_space_prefix (KV)": by_vocab[v]["summary"]["add_space_prefix_kv"],
                "space prefix observed": by_vocab[v]["summary"]["add_space_prefix_observed"],
                "by lstrip": by_vocab[v]["summary"]["by_lstrip"],
                "by clean_spaces": by_vocab[v]["summary"]["by_clean_spaces"],
                "by both": by_vocab[v]["summary"]["by_lstrip_and_clean_spaces"],
                "unexplained": by_vocab[v]["summary"]["by_other"],
            }
            for v in order
        ]
    )
    # 4.3: the guide's figures beside ours
    t43 = []
    for v in order:
        s = by_vocab[v]["summary"]
        g = guide.CENSUS.get(v)
        t43.append(
            {
                "vocab fixture": f"ggml-vocab-{v}.gguf",
                "differing tokens": f"{s['differing']} / {s['n_tokens']}",
                "of which lost a leading space": s["lost_leading_space"],
                "guide: differing": f"{g[0]} / {g[2]}" if g else "",
                "guide: lost a leading space": g[1] if g else "",
                "matches guide": ("yes" if (s["differing"], s["lost_leading_space"], s["n_tokens"]) == g else "NO") if g else "",
            }
        )
    t43 = pd.DataFrame(t43)
    ex_rows = []
    for v in order:
        diffs = {d["token"]: d for d in by_vocab[v]["diffs"]}
        if v in guide.EXAMPLES:
            tok, piece, detok = guide.EXAMPLES[v]
            d = diffs.get(tok)
            ex_rows.append(
                {
                    "vocab": v,
                    "tok": tok,
                    "piece": repr(d["piece"]) if d else "(no difference)",
                    "detok": repr(d["detok"]) if d else "",
                    "mechanism": d["mechanism"] if d else "",
                    "guide: piece / detok": f"{piece.decode()!r} / {detok.decode()!r}",
                }
            )
        elif by_vocab[v]["diffs"]:
            d = by_vocab[v]["diffs"][0]
            ex_rows.append(
                {
                    "vocab": v,
                    "tok": d["token"],
                    "piece": repr(d["piece"]),
                    "detok": repr(d["detok"]),
                    "mechanism": d["mechanism"],
                    "guide: piece / detok": "",
                }
            )
    tex = pd.DataFrame(ex_rows)
    sec.markdown = (
        "## 4.2 Which mechanism corrupts which vocab (measured)\n\n"
        "Per fixture: the vocab type llama.cpp reports, the `tokenizer.ggml.add_space_prefix` key (blank when absent), "
        "whether `llama_tokenize(add_special=false)` really prepends a space, and how many differing tokens each "
        "mechanism of `llama_detokenize` explains (`lstrip` from `add_space_prefix`, the `clean_spaces` passes, or both).\n\n"
        + md_table(t42)
        + "\n## 4.3 How many tokens got the wrong bytes\n\n"
        "`llama_token_to_piece(t, lstrip=0, special=false)` against `llama_detokenize(&t, 1, false, false)` for every token. "
        "The guide's four vocabs first, with its figures beside ours.\n\n"
        + md_table(t43)
        + "\nExamples (the guide's tokens for its vocabs; the lowest differing token id elsewhere):\n\n"
        + md_table(tex)
    )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    d = df.sort_values("vocab", ascending=False, kind="stable")
    ax.barh(d["vocab"], d["differing"] / d["n_tokens"] * 100, color="#c0504d")
    for i, (p, n) in enumerate(zip(d["differing"] / d["n_tokens"] * 100, d["differing"])):
        ax.text(p, i, f" {n}", va="center", fontsize=8)
    ax.set_xlabel("% of tokens whose detokenized bytes differ from the piece (count at bar end)")
    ax.set_title("Byte-diff census per vocab fixture")
    plt.tight_layout()
    sec.html = (
        "<p>Tokens whose bytes in upstream's table (single-token <code>llama_detokenize</code>) differ from the real piece "
        "(<code>llama_token_to_piece</code>).</p>"
        + svg(fig)
        + html_table(t43, "Guide table 4.3")
        + html_table(t42, "Guide table 4.2, measured")
        + html_table(tex, "Examples")
        + html_table(df, "census.csv")
    )
    plt.close(fig)
    return sec, failed


def _int_columns(df: pd.DataFrame) -> pd.DataFrame:
    """Counts stay integers where a row (a bridge not built) leaves them blank, not floats."""
    for col in df.columns:
        vals = df[col].dropna()
        if df[col].dtype.kind == "f" and len(vals) and all(float(x).is_integer() for x in vals):
            df[col] = df[col].astype("Int64")
    return df


def _rows(ok: list[dict[str, Any]]) -> tuple[pd.DataFrame, list[str]]:
    """The per-(vocab, bridge) rows of every result, sorted by vocab then bridge; and the
    vocabs in the order the guide's tables take (`guide_order`)."""
    df = pd.DataFrame([row for r in ok for row in r["rows"]])
    df = _int_columns(df.sort_values(["vocab", "bridge"], kind="stable").reset_index(drop=True))
    return df, guide_order(list(df.vocab.unique()))


def _pivot(df: pd.DataFrame, col: str, order: list[str]) -> dict[str, dict[str, Any]]:
    return {v: {b: df[(df.vocab == v) & (df.bridge == b)][col].iloc[0] for b in df[df.vocab == v].bridge} for v in order}


def _bar_by_bridge(df: pd.DataFrame, col: str, title: str, xlabel: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    vocabs = sorted(df.vocab.unique(), reverse=True)
    bridges_ = sorted(df.bridge.unique(), reverse=True)
    fig, ax = plt.subplots(figsize=(8, 0.3 * len(vocabs) * len(bridges_) / 2 + 1.2))
    h = 0.8 / len(bridges_)
    colors = {"upstream": "#c0504d", "fixed": "#9bbb59"}
    for j, b in enumerate(bridges_):
        vals = [int(df[(df.vocab == v) & (df.bridge == b)][col].sum()) for v in vocabs]
        ys = [i + j * h for i in range(len(vocabs))]
        ax.barh(ys, [max(x, 0.5) if x else 0 for x in vals], height=h, label=b, color=colors.get(b, None))
        for y, x in zip(ys, vals):
            if x:
                ax.text(x, y, f" {x}", va="center", fontsize=7)
    ax.set_yticks([i + h * (len(bridges_) - 1) / 2 for i in range(len(vocabs))], vocabs)
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.legend(loc="lower right")
    plt.tight_layout()
    out = svg(fig)
    plt.close(fig)
    return out


# -- leak test (guide 4.4, 7.1) ---------------------------------------------------------------------
def leak_section(results: Path) -> tuple[Section | None, list[dict[str, Any]]]:
    ok, failed = load_results(results, "leak")
    if not ok:
        return None, failed
    df, order = _rows(ok)
    space = _pivot(df, "allowed_with_space", order)
    illegal = _pivot(df, "allowed_illegal", order)
    t44 = pd.DataFrame(
        [
            {
                "vocab": v,
                "without fix (space)": space[v].get("upstream", ""),
                "with fix (space)": space[v].get("fixed", ""),
                "guide: without / with": "{} / {}".format(*guide.LEAK[v]) if v in guide.LEAK else "",
                "without fix (illegal)": illegal[v].get("upstream", ""),
                "with fix (illegal)": illegal[v].get("fixed", ""),
            }
            for v in order
        ]
    )
    pieces = {r["vocab"]: r["leaked"].get("upstream", []) for r in ok}
    bpe = ", ".join(repr(x["piece"]) for x in pieces.get("llama-bpe", []) if x["space"])
    sec = Section("Leak test (guide 4.4, 7.1)", tables={"leak": df})
    sec.markdown = (
        "## 4.4 / 7.1 Leak test: whitespace the grammar forbids\n\n"
        f"Grammar `{'`, `'.join(sorted({r['grammar'] for r in ok}))}`, position 0. "
        "*space*: allowed tokens whose real piece (`llama_token_to_piece`) contains a space (the guide's count). *illegal*: allowed tokens that the mask computed "
        "from real pieces with byte forcing off does not allow (space or not). The guide's vocabs first.\n\n"
        + md_table(t44)
        + (f"\nllama-bpe without the fix leaks: {bpe}.\n" if bpe else "")
    )
    sec.html = (
        _bar_by_bridge(df, "allowed_illegal", "Allowed tokens at position 0 that the grammar forbids", "tokens (symlog)")
        + html_table(t44)
        + html_table(df, "leak.csv")
    )
    return sec, failed


# -- forced-mask test (guide 5.1, 7.2) --------------------------------------------------------------
def forced_section(results: Path) -> tuple[Section | None, list[dict[str, Any]]]:
    ok, failed = load_results(results, "forced")
    if not ok:
        return None, failed
    df, order = _rows(ok)

    def cell(v: str, b: str) -> str:
        row = df[(df.vocab == v) & (df.bridge == b)]
        if row.empty:
            return ""
        r = row.iloc[0]
        pieces = ", ".join(repr(x) for x in json.loads(r["pieces"]))
        verdict = "ok" if r["not_prefix"] == 0 and r["output_ok"] else "FAILS"
        return f"{verdict}, {r['allowed']} allowed: {pieces}"

    t72 = pd.DataFrame(
        [
            {
                "vocab": v,
                "without fix": cell(v, "upstream"),
                "with fix": cell(v, "fixed"),
                "guide: without": ", ".join(repr(p.decode()) for p in guide.FORCED[v][0]) if v in guide.FORCED else "",
                "guide: with": ", ".join(repr(p.decode()) for p in guide.FORCED[v][1]) if v in guide.FORCED else "",
                "llguidance error without fix": df[(df.vocab == v) & (df.bridge == "upstream")]["error"].iloc[0]
                if not df[(df.vocab == v) & (df.bridge == "upstream")].empty
                else "",
            }
            for v in order
        ]
    )
    sec = Section("Forced-mask test (guide 5.1, 7.2)", tables={"forced": df})
    sec.markdown = (
        "## 5.1 / 7.2 Forced-mask test: every allowed token must be a prefix of the literal\n\n"
        f"Grammar admitting only {', '.join(repr(x) for x in sorted({r['literal'] for r in ok}))}. "
        "*ok* when every allowed token's real bytes are a prefix of the literal and following the matcher (lowest allowed id each step) spells it exactly; the error is "
        "llguidance's own message, at the step where the matcher dies (llama.cpp then drops the constraint silently).\n\n"
        + md_table(t72)
    )
    sec.html = html_table(t72) + html_table(df, "forced.csv")
    return sec, failed


# -- the probe (guide 5.3, 6) -----------------------------------------------------------------------
def probe_section(results: Path) -> tuple[Section | None, list[dict[str, Any]]]:
    ok, failed = load_results(results, "probe")
    if not ok:
        return None, failed
    df = pd.DataFrame([r["probe"] for r in ok]).sort_values("vocab", kind="stable").reset_index(drop=True)
    order = guide_order(list(df.vocab))
    view = df.set_index("vocab").loc[order].reset_index()[
        ["vocab", "vocab_type", "tokenize_exact", "failed_probe", "got", "greedy", "byte_forcing"]
    ]
    for col in ("failed_probe", "got"):  # quoted, so a leading space stays visible
        view[col] = [repr(x) if x else "" for x in view[col]]
    sec = Section("The probe (guide 5.3, 6)", tables={"probe": df})
    sec.markdown = (
        "## 5.3 / 6 The probe: which vocabs lose byte forcing\n\n"
        "The PR's three probes (`The`, `a b`, `1\\n2`) tokenized as `tokenize_fn` would and reassembled with "
        "`llama_token_to_piece`. Not exact: the fixed bridge uses llguidance's greedy tokenization, so byte forcing "
        "(and `llg_matcher_compute_ff_tokens`) is lost; the mask stays exact (guide 6).\n\n" + md_table(view)
    )
    sec.html = html_table(view)
    return sec, failed


# -- the compiled code (guide 7, 8 unit level) ----------------------------------------------------
def native_section(results: Path) -> tuple[Section | None, list[dict[str, Any]]]:
    ok, failed = load_results(results, "native")
    if not ok:
        return None, failed
    df = _int_columns(pd.DataFrame([row for r in ok for row in r["rows"]]))
    rank = df.sampler.map({"upstream": 0, "fixed": 1})  # shipped first, as the guide's tables have it
    df = df.assign(_rank=rank).sort_values(["vocab", "_rank"], kind="stable").drop(columns="_rank").reset_index(drop=True)
    diffs = pd.DataFrame([d for r in ok for d in r.get("differences", [])])
    order = guide_order(list(df.vocab.unique()))

    def get(v: str, s: str) -> dict[str, Any]:
        row = df[(df.vocab == v) & (df.sampler == s)]
        return row.iloc[0].to_dict() if not row.empty else {}

    def pr_cell(r: dict[str, Any]) -> str:
        if not r or r.get("pr_test_exit", "") == "":
            return ""
        return f"exit {r['pr_test_exit']}, {r['no_space_bad']} bad / {r['forced_bad']} not prefix"

    def guide_cell(v: str, i: int) -> str:
        if v not in guide.UNIT:
            return ""
        code, bad = guide.UNIT[v][i]
        return f"exit {code}, {bad} bad"

    def match(v: str) -> str:
        if v not in guide.UNIT:
            return ""
        got = [(get(v, s).get("pr_test_exit"), get(v, s).get("no_space_bad")) for s in ("upstream", "fixed")]
        return "✓" if got == [tuple(x) for x in guide.UNIT[v]] else "✗"

    t7 = pd.DataFrame([
        {"vocab": v, "PR test, shipped sampler": pr_cell(get(v, "upstream")), "PR test, fixed sampler": pr_cell(get(v, "fixed")),
         "string tests (fixed)": get(v, "fixed").get("string_tests", ""),
         "guide: without fix": guide_cell(v, 0), "guide: with fix": guide_cell(v, 1), "match": match(v)}
        for v in order
    ])

    def shipped_cell(r: dict[str, Any]) -> str:
        if not r or r.get("shipped_test_exit", "") == "":
            return ""
        if r["shipped_test_exit"] == 0:
            return "exit 0"
        return f"exit {r['shipped_test_exit']}: {r['shipped_test_failure']}"

    shipped = pd.DataFrame([
        {"vocab": v, "tok_eos": get(v, "upstream").get("tok_eos", ""), "shipped test, shipped sampler": shipped_cell(get(v, "upstream")),
         "shipped test, fixed sampler": shipped_cell(get(v, "fixed")),
         "the sampler's first llg error (fixed)": get(v, "fixed").get("shipped_test_llg_error", "")}
        for v in order
    ])
    cells = int(pd.to_numeric(df["diff_cells"], errors="coerce").fillna(0).sum())
    differ = int(pd.to_numeric(df["diff_differ"], errors="coerce").fillna(0).sum())
    n_vocabs = df.vocab.nunique()
    harness_errors = df[df["harness_error"].astype(str) != ""]
    reproduced = sum(1 for v in guide.UNIT if match(v) == "✓")

    sec = Section("The compiled code: llama.cpp's own test and the port checked (guide 7, 8 unit level)", tables={"native": df})
    if not diffs.empty:
        sec.tables["native_differences"] = diffs
    intro = (
        "`common/llguidance.cpp` compiled as shipped (*shipped sampler*) and with the PR applied from `patches/` "
        "(*fixed sampler*), linked against the same libllama and llguidance as the rest of this report; "
        "`tests/test-grammar-llguidance.cpp` as shipped and with the PR's tests (`patches/`). "
        "Exit 134 is an abort (a failed assertion). *bad* is `test_no_space_tokens`' count (allowed tokens whose real "
        "piece has a space, grammar `start: /[.a-z]{2,6}/ \"!\"`), *not prefix* is `test_forced_mask_bytes`' "
        "(allowed tokens that do not spell a prefix of `hello world`).\n\n"
        f"Guide table 7 reproduced from the real binaries on {reproduced} of {len(guide.UNIT)} of the guide's vocabs.\n\n"
    )
    diff_text = (
        f"The port against the compiled sampler: {cells} cells compared on {n_vocabs} vocabs and both samplers "
        "(the leak grammar at position 0, the forced literal followed step by step, every soundness walk; a cell is one "
        f"step of one job, plus where each walk ends and whether the greedy fallback engaged): {differ} differ."
        + (f" The harness did not finish on: {', '.join(f'{r.vocab}/{r.sampler}' for r in harness_errors.itertuples())}." if len(harness_errors) else "")
        + "\n\n"
    )
    shipped_text = (
        "The shipped test (before the PR) on every vocab. Where the string tests fail on a vocab whose tokenizer is "
        "not byte exact, they tokenize their own expected strings with `common_tokenize`, which prepends a space "
        "(guide 7.3); the PR skips them there. A failure after an `llg error` is the sampler having dropped its grammar "
        "earlier in the run (it then lets every token through, so a later invalid string matches). `tok_eos` -1 means "
        "the vocab has neither EOT nor EOS, which `test_sampler_chain` indexes anyway.\n\n"
    )
    sec.markdown = (
        "## 7 / 8 (unit level) The compiled code: llama.cpp's own test, and the port checked\n\n" + intro + md_table(t7)
        + "\n" + diff_text + shipped_text + md_table(shipped)
    )
    sec.html = (
        "<p>" + html.escape(intro).replace("\n\n", "</p><p>") + "</p>" + html_table(t7)
        + "<p>" + html.escape(diff_text.strip()) + "</p>"
        + (html_table(diffs, "native_differences.csv") if not diffs.empty else "")
        + "<p>" + html.escape(shipped_text.strip()) + "</p>" + html_table(shipped)
        + "<p>The PR as it applies to the vendored tree: "
        + " · ".join(f"<a href='../patches/{p.name}'>{html.escape(p.name)}</a>" for p in sorted((ROOT / "patches").glob("*.patch")))
        + "</p>" + html_table(df, "native.csv")
    )
    return sec, failed


# -- end-to-end model matrix (guide 8) -------------------------------------------------------------
def matrix_section(results: Path) -> tuple[Section | None, list[dict[str, Any]]]:
    ok, failed = load_results(results, "matrix")
    if not ok:
        return None, failed
    df = pd.DataFrame([row for r in ok for row in r["rows"]])
    df = df.sort_values(["synthetic", "model", "case", "bridge"], ascending=[False, True, True, True], kind="stable").reset_index(drop=True)
    devices = sorted({f"{r['device']} (n_gpu_layers={r['n_gpu_layers']})" for r in ok})
    settings = sorted({(r["temperature"], r["seed"], r["max_tokens"]) for r in ok})
    t8 = []
    for model, g in df.groupby("model", sort=False):
        up, fx = g[g.bridge == "upstream"], g[g.bridge == "fixed"]

        def score(x: pd.DataFrame) -> str:
            if x.empty:
                return ""
            n_err = int(x.llg_errors.sum())
            other = ", ".join(f"{k} {v}" for k, v in sorted(x.outcome.value_counts().items()) if k != "pass")
            return f"{int((x.outcome == 'pass').sum())}/{len(x)}, {n_err} llg error{'s' if n_err != 1 else ''}" + (f" ({other})" if other else "")

        t8.append(
            {
                "model": model + (" (synthetic)" if g.synthetic.iloc[0] else ""),
                "vocab": g.vocab.iloc[0],
                "without fix": score(up),
                "with fix": score(fx),
                "greedy engaged": "yes" if (not fx.empty and bool(fx.greedy.iloc[0])) else "no",
            }
        )
    t8 = pd.DataFrame(t8)
    quotes = df[(df.bridge == "upstream") & (df.outcome != "pass")]
    quote_md = "".join(f"- {r.model}, {r.case}: `{r.output[:100]!r}`" + (f" (llguidance: {r.error})" if r.error else "") + "\n" for r in quotes.itertuples())
    sec = Section("End-to-end model matrix (guide 8)", tables={"matrix": df})
    sec.markdown = (
        "## 8 End-to-end: constrained generation through each bridge\n\n"
        "Generation the way llama.cpp's llguidance sampler does it (mask, sample, consume; on a mask error the matcher "
        "is dropped and generation continues unconstrained). Outputs judged by exact string, JSON Schema validation or "
        f"regex, never by llguidance. Device: {', '.join(devices)}. Temperature, seed, token limit: "
        f"{', '.join(f'{t}, {s}, {m}' for t, s, m in settings)}. Synthetic models have random weights around the "
        "fixture's real tokenizer. One departure from the server: the JSON case asks llguidance for compact "
        "whitespace (`whitespace_flexible: false`), so a random-weight model cannot loop on whitespace. The `dots` "
        "case is built so that upstream's space-stripped tokens (`' .'`, `' ..'`) are a real choice.\n\n"
        + md_table(t8)
        + "\nOutputs without the fix that are not a pass, as produced:\n\n"
        + (quote_md or "(none)\n")
    )
    sec.html = html_table(t8) + html_table(df, "matrix.csv")
    return sec, failed


def _witness_kind(witness: str) -> str:
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


# -- tokenize exactness and the probe (guide 10, rows 2 and 4) --------------------------------------
def exactness_section(results: Path) -> tuple[Section | None, list[dict[str, Any]]]:
    ok, failed = load_results(results, "exactness")
    if not ok:
        return None, failed
    key = ["vocab", "bridge"]
    bridges_ = pd.DataFrame([row for r in ok for row in r["bridges"]])
    for analysis, col, name in (("leak", "allowed_illegal", "leak_allowed_illegal"), ("forced", "not_prefix", "forced_not_prefix")):
        got, _ = load_results(results, analysis)
        rows = pd.DataFrame([row for r in got for row in r["rows"]])
        if not rows.empty and col in rows:
            bridges_ = bridges_.merge(rows[key + [col]].rename(columns={col: name}), on=key, how="left")
            bridges_[name] = bridges_[name].astype("Int64")  # a bridge not built has no count, not NaN
    bridges_ = bridges_.sort_values(key, kind="stable").reset_index(drop=True)
    exact = pd.DataFrame([row for r in ok for row in r["exactness"]]).sort_values(key, kind="stable").reset_index(drop=True)
    pvx = pd.DataFrame([r["probe_vs_exactness"] for r in ok]).sort_values("vocab", kind="stable").reset_index(drop=True)
    n_inputs = sorted({r["n_inputs"] for r in ok})

    def exact_on(bridge: str) -> str:
        b = bridges_[(bridges_.bridge == bridge) & (bridges_.built == True)]  # noqa: E712
        names = sorted(b[b.tokenize_exact_rate == 1.0].vocab)
        return ", ".join(names) if names else "none"

    not_built = bridges_[bridges_.built == False]  # noqa: E712
    misses = pvx[pvx.cell.str.startswith("probe misses")]
    kinds = {r.vocab: _witness_kind(r.witness) for r in misses.itertuples()}
    counts = ", ".join(f"{n} {k}" for k, n in sorted(Counter(kinds.values()).items()))
    sec = Section(
        "Tokenize exactness and the probe (guide 10, rows 2 and 4)",
        tables={"bridges": bridges_, "exactness": exact, "probe_vs_exactness": pvx},
    )
    sec.markdown = (
        "## 10 What the guide leaves open, measured: tokenize exactness and the probe\n\n"
        f"`sentinel` is a port of llguidance's own llama.cpp integration (`lltokenizer_from_vocab`). "
        f"{', '.join(map(str, n_inputs))} seeded inputs per vocab through each bridge's tokenizer as llguidance sees it "
        "(`tokenize_fn`, or llguidance's greedy tokenizer where the bridge has none); exact when the tokens' real "
        "bytes spell the input.\n\n"
        f"- **Row 2, a byte-exact tokenizer for SentencePiece?** Tokenization exact on every input: upstream on "
        f"{exact_on('upstream')}; fixed on {exact_on('fixed')}; sentinel on {exact_on('sentinel')}. Sentinel not built on: "
        + (", ".join(f"{r.vocab} ({r.build_error})" for r in not_built[not_built.bridge == 'sentinel'].itertuples()) or "none")
        + ".\n"
        f"- **Row 4, is the probe robust?** The probe and the inputs agree on {int(pvx.agree.sum())} of {len(pvx)} vocabs. "
        + (
            "Where the probe calls `llama_tokenize` exact but an input shows otherwise (witness -> the real bytes of its "
            "tokens): "
            + "; ".join(f"{r.vocab} ({r.witness} -> {r.witness_got})" for r in misses.itertuples())
            + f". The witnesses by kind: {counts} (special-token text is what `parse_special=true` turns into a "
            "control token with no bytes)."
            if not misses.empty
            else "It never keeps an inexact tokenizer."
        )
        + "\n\n### bridges.csv\n\n"
        + md_table(bridges_)
        + "\n### probe_vs_exactness.csv\n\n"
        + md_table(pvx[["vocab", "probe_exact", "failed_probe", "inputs_exact", "inputs_inexact", "cell", "witness", "witness_got"]])
    )
    sec.html = html_table(bridges_, "bridges.csv") + html_table(pvx, "probe_vs_exactness.csv") + html_table(exact, "exactness.csv")
    return sec, failed


# -- mask soundness over the grammar battery (guide 10, row 1) --------------------------------------
def soundness_section(results: Path) -> tuple[Section | None, list[dict[str, Any]]]:
    ok, failed = load_results(results, "soundness")
    if not ok:
        return None, failed
    sound = pd.DataFrame([row for r in ok for row in r["soundness"]]).sort_values(["vocab", "bridge"], kind="stable").reset_index(drop=True)
    under = sound.groupby("bridge")["under"].sum()
    under_vocabs = {b: sorted(sound[(sound.bridge == b) & (sound.under > 0)].vocab) for b in sound.bridge.unique()}
    sec = Section("Mask soundness over a grammar battery (guide 10, row 1)", tables={"soundness": sound})
    sec.markdown = (
        "## 10 What the guide leaves open, measured: mask soundness\n\n"
        "A battery of grammars walked along valid strings; at every step each bridge's mask against the mask llguidance "
        "computes from real pieces with forcing off. *under* = allowed but illegal, *over* = legal but masked (forcing "
        "collapses counted apart).\n\n"
        f"- **Row 1, is greedy acceptable?** The fixed bridge's under-constraint over the battery: {int(under.get('fixed', 0))} "
        f"(upstream: {int(under.get('upstream', 0))}, sentinel: {int(under.get('sentinel', 0))}). Vocabs where fixed is "
        f"under-constrained: {', '.join(under_vocabs.get('fixed', [])) or 'none'}.\n"
        "\n### soundness.csv\n\n"
        + md_table(sound[["vocab", "bridge", "forcing", "steps", "under", "over", "over_collapsed", "stop_disagree", "errors"]])
    )
    sec.html = (
        _bar_by_bridge(sound, "under", "Under-constraint over the grammar battery (allowed but illegal)", "(step, token) pairs, symlog")
        + html_table(sound, "soundness.csv")
    )
    return sec, failed


SECTIONS: list[tuple[str, Callable[[Path], tuple[Section | None, list[dict[str, Any]]]]]] = [
    ("census", census_section),
    ("leak", leak_section),
    ("forced", forced_section),
    ("probe", probe_section),
    ("native", native_section),
    ("matrix", matrix_section),
    ("exactness", exactness_section),
    ("soundness", soundness_section),
]


def versions() -> dict[str, str]:
    out = {}
    for pkg in ("llama-cpp-python", "llguidance", "gguf", "papermill", "pandas"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    out["llama.cpp"] = f"as vendored by llama-cpp-python {out['llama-cpp-python']}"
    return out


def _links(out: Path, analysis: str) -> str:
    d = out / "html" / analysis
    items = [f'<a href="html/{analysis}/{p.name}">{html.escape(p.stem)}</a>' for p in sorted(d.glob("*.html"))]
    return " · ".join(items) if items else "<em>(executed notebooks are generated by make report; not committed)</em>"


def inputs_table(results: Path) -> pd.DataFrame:
    """Every (analysis, input) run: whether it succeeded, and the one-line error if not."""
    rows = []
    for name, _ in SECTIONS:
        ok, failed = load_results(results, name)
        rows += [{"analysis": name, "input": r["vocab"], "status": "ok", "error": ""} for r in ok]
        rows += [{"analysis": name, "input": r.get("vocab"), "status": "failed", "error": r.get("error", "")} for r in failed]
    if not rows:
        return pd.DataFrame()
    return pd.DataFrame(rows).sort_values(["analysis", "input"], kind="stable").reset_index(drop=True)


def build(results: Path = RESULTS, out: Path = REPORTS) -> list[dict[str, Any]]:
    """Write the report; return the failed inputs."""
    sections: list[tuple[str, Section]] = []
    failed: list[dict[str, Any]] = []
    for name, fn in SECTIONS:
        sec, f = fn(results)
        failed += f
        if sec is not None:
            sections.append((name, sec))
    inputs = inputs_table(results)
    if not inputs.empty:
        write_atomic(out / "tables" / "inputs.csv", inputs.to_csv(index=False, lineterminator="\n"))
    for _, sec in sections:
        for tname, df in sec.tables.items():
            write_atomic(out / "tables" / f"{tname}.csv", df.to_csv(index=False, lineterminator="\n"))
    v = versions()
    md = [
        "# PR review tables, regenerated\n",
        "Every table of the review guide for the llguidance token-bytes / tokenize_fn fix, measured by this suite "
        "(`make report`) on the vocab fixtures vendored in llama-cpp-python "
        f"{v['llama-cpp-python']}, through llguidance {v['llguidance']}. Section numbers are the guide's.\n",
    ]
    if failed:
        md.append("**Failed inputs:** " + "; ".join(f"{f.get('notebook')}/{f.get('vocab')}: {f.get('error')}" for f in failed) + "\n")
    md += [sec.markdown for _, sec in sections]
    write_atomic(out / "pr-review-tables.md", "\n".join(md))

    body = [
        "<!doctype html><html><head><meta charset='utf-8'><title>llama.cpp / llguidance bridge audit</title>",
        "<style>body{font-family:system-ui,sans-serif;max-width:70em;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse;font-size:90%;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:2px 6px}"
        ".failed{background:#fee;border:1px solid #c00;padding:.5em 1em}</style></head><body>",
        "<h1>llama.cpp &harr; llguidance bridge audit</h1>",
    ]
    if failed:
        body.append("<div class='failed'><h2>Failed inputs</h2><ul>")
        body += [f"<li><b>{html.escape(str(f.get('notebook')))}/{html.escape(str(f.get('vocab')))}</b>: {html.escape(str(f.get('error')))}</li>" for f in failed]
        body.append("</ul></div>")
    body.append(
        "<p>What was run: every analysis notebook in <code>notebooks/</code>, once per vocab fixture, by papermill "
        "(<code>make report</code>). Versions: "
        + ", ".join(f"{html.escape(k)} {html.escape(val)}" for k, val in v.items())
        + ". The guide's tables in markdown: <a href='pr-review-tables.md'>pr-review-tables.md</a>; "
        "raw tables: <code>tables/*.csv</code>.</p>"
    )
    body.append("<ul>" + "".join(f"<li><a href='#{name}'>{html.escape(sec.title)}</a></li>" for name, sec in sections) + "</ul>")
    for name, sec in sections:
        body.append(f"<h2 id='{name}'>{html.escape(sec.title)}</h2>")
        body.append(sec.html)
        body.append(f"<p>Executed notebooks: {_links(out, name)}</p>")
    body.append("</body></html>\n")
    write_atomic(out / "index.html", "\n".join(body))
    write_json(out / "run.json", {"versions": v, "failed": failed})
    return failed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--out", type=Path, default=REPORTS)
    a = ap.parse_args(argv)
    failed = build(a.results, a.out)
    print(f"report written to {a.out.relative_to(ROOT) if a.out.is_relative_to(ROOT) else a.out}", flush=True)
    if failed:
        for f in failed:
            print(f"FAILED {f.get('notebook')}/{f.get('vocab')}: {f.get('error')}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
