"""Gather the per-vocab results into the reviewer-facing report.

    python -m llgbridge.report [--results DIR] [--out DIR]

Writes `tables/*.csv`, `pr-review-tables.md` and `index.html` under the output folder
(default `reports/`), each through a temporary name. Tables are sorted and carry no timestamps,
so two runs on the same inputs give the same bytes; run metadata (versions, timings) goes to
`run.json` beside them. Exits 1, naming each failed input, when any run failed.

Each section (census, ...) is a function from the results to tables, markdown and HTML, so a
new analysis adds one section without touching the others.
"""

from __future__ import annotations

import argparse
import html
import io
import json
import sys
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


def md_table(df: pd.DataFrame) -> str:
    return df.astype(object).where(df.notna(), "").to_markdown(index=False, disable_numparse=True) + "\n"


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


def _fmt_piece(s: str) -> str:
    return repr(s)


# -- census (guide 4.2, 4.3) ----------------------------------------------------------------------
def census_section(results: Path) -> tuple[Section | None, list[dict[str, Any]]]:
    ok, failed = load_results(results, "census")
    if not ok:
        return None, failed
    rows = [r["summary"] for r in ok]
    df = pd.DataFrame(rows).sort_values("vocab", kind="stable").reset_index(drop=True)
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
                    "piece": _fmt_piece(d["piece"]) if d else "(no difference)",
                    "detok": _fmt_piece(d["detok"]) if d else "",
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
                    "piece": _fmt_piece(d["piece"]),
                    "detok": _fmt_piece(d["detok"]),
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
        + "<h3>Guide table 4.3</h3>"
        + t43.to_html(index=False, escape=True)
        + "<h3>Guide table 4.2, measured</h3>"
        + t42.to_html(index=False, escape=True, na_rep="")
        + "<h3>Examples</h3>"
        + tex.to_html(index=False, escape=True)
        + "<h3>census.csv</h3>"
        + df.to_html(index=False, escape=True)
    )
    plt.close(fig)
    return sec, failed


SECTIONS: list[tuple[str, Callable[[Path], tuple[Section | None, list[dict[str, Any]]]]]] = [
    ("census", census_section),
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


def build(results: Path = RESULTS, out: Path = REPORTS) -> list[dict[str, Any]]:
    """Write the report; return the failed inputs."""
    sections: list[tuple[str, Section]] = []
    failed: list[dict[str, Any]] = []
    for name, fn in SECTIONS:
        sec, f = fn(results)
        failed += f
        if sec is not None:
            sections.append((name, sec))
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
    for name, sec in sections:
        body.append(f"<h2>{html.escape(sec.title)}</h2>")
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
