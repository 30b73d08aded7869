"""Assembly: every section built from one `Results`, then the pages, the Markdown, the tables and
run.json written, each through a temporary name."""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Callable
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd

from ..analyses import PAGE
from ..fixtures import refused as refused_inputs
from ..native.builder import vendored_commit
from ..paths import REPORTS, RESULTS, ROOT, write_atomic, write_json
from . import gfm, repro, tested
from .comment import comment
from .data import Results
from .glossary import GLOSSARY
from .story import vocab_story
from .table import PR_BASE, Section, Table, guide_order, html_table, overridden_note
from .verdict import Verdict, recommendation_md, verdict

# the page's order (`analyses.PAGE`): each section is `report/KEY.py`'s `KEY_section`, found by its
# name, so adding an analysis adds no line here
SECTIONS: list[tuple[str, Callable[[Results], Section | None]]] = [
    (key, getattr(importlib.import_module(f"{__package__}.{key}"), f"{key}_section")) for key in PAGE
]


def versions() -> dict[str, str]:
    out = {}
    for pkg in ("llama-cpp-python", "llguidance", "gguf", "papermill", "pandas"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


BRIDGES_SUMMARY = "The four bridges: each one's token table and tokenize_fn"


def code_block(v: dict[str, str]) -> str:
    """What code was tested: a paragraph, then the bridges' table (the page shows it collapsed
    under `BRIDGES_SUMMARY`, after the paragraph's first blank line)."""
    commit = vendored_commit()
    return (
        f"**What is a port and what is compiled.** The bridges below are Python ports of `common/llguidance.cpp`, "
        f"field for field, driving the real llguidance {v['llguidance']} (its C API, from its wheel) and the real "
        f"llama.cpp (llama-cpp-python {v['llama-cpp-python']}). The section *The compiled code* runs the C++ itself: "
        f"`common/llguidance.cpp` before the PR (the upstream sampler), the same file with the PR applied from "
        f"`patches/`, and llama.cpp's own `test-grammar-llguidance`, and checks the port against the compiled sampler "
        f"step by step. llama.cpp is the tree that llama-cpp-python {v['llama-cpp-python']} vendors"
        + (f" (commit {commit[:12]})" if commit else "")
        + f"; the PR's base is {PR_BASE} (the guide). The end-to-end matrix uses synthetic models unless marked real. "
        "Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()) + ".\n\n"
        "| bridge | token table | `tokenize_fn` | what it is |\n|---|---|---|---|\n| `upstream` | "
        "`llama_detokenize(&t, 1, false, false)` | `llama_tokenize(add_special=false, parse_special=true)` | llama.cpp "
        "before the PR (the upstream sampler) |\n| `fixed` | `llama_token_to_piece(t, 0, false)` | kept only where the "
        "PR's three probes round-trip, else greedy | the PR |\n| `sentinel` | `llama_token_to_piece(t, 0, true)` | "
        "`llama_tokenize` with a sentinel byte prepended and stripped | llguidance's own `lltokenizer_from_vocab` |\n"
        '| `truth` | `llama_token_to_piece` | none (forcing off) | the yardstick for "legal" |\n'
    )


def inputs_table(res: Results) -> pd.DataFrame:
    """Every (analysis, input) run: whether it succeeded, and the one-line error if not."""
    rows = []
    for name, _ in SECTIONS:
        ok, failed = res.load(name)
        rows += [{"analysis": name, "input": r["vocab"], "status": "ok", "error": ""} for r in ok]
        rows += [
            {"analysis": name, "input": r.get("vocab"), "status": "failed", "error": r.get("error", "")} for r in failed
        ]
    if not rows:
        return pd.DataFrame()
    return pd.DataFrame(rows).sort_values(["analysis", "input"], kind="stable").reset_index(drop=True)


@cache
def environment() -> Any:
    import jinja2
    import mistune

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("llgbridge", "templates"),
        autoescape=jinja2.select_autoescape(["html.j2"]),
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    md = mistune.create_markdown(escape=True, plugins=["table"])
    env.filters["md"] = lambda s: jinja2.utils.markupsafe.Markup(md(s) if s else "")
    env.filters["md_inline"] = lambda s: jinja2.utils.markupsafe.Markup(
        str(md(s)).strip().removeprefix("<p>").removesuffix("</p>") if s else ""
    )
    env.filters["gfm"] = gfm.prose  # the Markdown files: what GitHub would read as HTML stays text
    return env


def vocab_pages(
    out: Path, sections: list[Section], vocabs: list[str], vt: Verdict | None, res: Results, link_notebooks: bool
) -> None:
    env = environment()
    rows = {x: i for i, x in reversed(list(enumerate(vt.df["input"])))} if vt is not None else {}  # first row wins
    for v in vocabs:
        parts = []
        for sec in sections:
            tables = []
            for t in sec.raw:
                col = "vocab" if "vocab" in t.df else ("input" if "input" in t.df else None)
                if col:
                    sub = t.df[t.df[col] == v].reset_index(drop=True)
                    if not sub.empty:
                        tables.append(Table(sub, name=t.name))
            nb = out / "html" / sec.notebook / f"{v}.html" if sec.notebook else None
            linked = bool(link_notebooks and nb and nb.exists())
            if tables or linked:
                parts.append(
                    {
                        "key": sec.key,
                        "title": sec.title,
                        "tables": tables,
                        "notebook": f"../html/{sec.notebook}/{v}.html" if linked else "",
                        "notebook_path": f"html/{sec.notebook}/{v}.html" if sec.notebook and not linked else "",
                    }
                )
        row = ""
        if vt is not None and v in rows:
            row = html_table(vt.df.iloc[[rows[v]]].reset_index(drop=True))
        story = vocab_story(res, v)
        # reports/html/ is git-ignored: a committed page names where its notebooks are written, once
        note = (
            ""
            if link_notebooks
            else (
                f"Executed notebooks for {v}, one per analysis, are written by `make report` under "
                f"reports/html/ANALYSIS/{v}.html (not committed)."
            )
        )
        write_atomic(
            out / "vocab" / f"{v}.html",
            env.get_template("vocab.html.j2").render(
                vocab=v, parts=parts, verdict_row=row, story=story, notebooks_note=note
            ),
        )


def build(
    results: Path = RESULTS,
    out: Path = REPORTS,
    bench_csv: Path = REPORTS / "bench.csv",
    lead: Callable[[], list[Section]] | None = None,
) -> list[dict[str, Any]]:
    """Write the report; return the failed inputs. Every result is read once, into the one
    `Results` the sections, the verdict and the vocab pages share; `bench_csv` is the `make bench`
    snapshot they quote (its files beside it); `lead` makes the sections that lead the page, once
    this build's tables are written, since it may read them (a what-if's comparison with the file
    without its overrides)."""
    res = Results(results, out, bench_csv)
    failed: list[dict[str, Any]] = []
    sections: list[Section] = []
    for name, fn in SECTIONS:
        _, f = res.load(name)
        failed += f
        try:
            sec = fn(res)
        except Exception as e:  # noqa: BLE001 - one analysis must not cost the others their section
            failed.append(
                {
                    "notebook": name,
                    "vocab": "(all)",
                    "error": f"the report could not build this section: {type(e).__name__}: {e}",
                }
            )
            continue
        if sec is not None:
            sections.append(sec)
    # a file name Make cannot carry never became a target: it is a failed input all the same
    if results.resolve() == RESULTS.resolve():
        failed += refused_inputs()
    for line in res.dropped():  # a result whose input file is gone: left out, and said
        print(line, file=sys.stderr)
    try:
        vt = verdict(res)
    except Exception as e:  # noqa: BLE001 - the verdict must not cost the report either
        failed.append(
            {
                "notebook": "verdict",
                "vocab": "(all)",
                "error": f"the report could not build the verdict: {type(e).__name__}: {e}",
            }
        )
        vt = None
    inputs = inputs_table(res)
    written: set[str] = set()
    if not inputs.empty:
        write_atomic(out / "tables" / "inputs.csv", inputs.to_csv(index=False, lineterminator="\n"))
        written.add("inputs.csv")
    committed = out.resolve() == REPORTS.resolve()

    def write(sec: Section) -> None:
        # an input that is a model loaded with key overrides is said to be one under every table it is in
        for t in sec.views:
            note = overridden_note(t.df)
            if note and note not in t.note:
                t.note = f"{t.note}\n\n{note}".strip()
        for t in sec.raw:
            write_atomic(out / "tables" / f"{t.name}.csv", t.csv)
            written.add(f"{t.name}.csv")
        for rel, text in sec.assets.items():
            svg_head = rel.endswith(".svg") and not text.startswith("<?xml")
            write_atomic(out / rel, '<?xml version="1.0" encoding="utf-8"?>\n' + text if svg_head else text)
        if sec.notebook:
            d = out / "html" / sec.notebook
            # only the pages of inputs this report has a result for: a page left by an input since
            # removed (or by a by-hand run) is not the report's
            have = {p.stem for p in (results / sec.notebook).glob("*.json")}
            # the committed report links none: reports/html/ is generated and git-ignored, so in a
            # clean checkout every such link would be dead; the page names the folder instead
            if not committed:
                sec.notebooks = [
                    (p.stem, f"html/{sec.notebook}/{p.name}") for p in sorted(d.glob("*.html")) if p.stem in have
                ]

    for sec in sections:
        write(sec)
    # a table this build did not write (its section failed, or has no results now) must not stay
    # behind with an earlier build's rows, beside a page that says the section failed
    for old in (out / "tables").glob("*.csv"):
        if old.name not in written:
            old.unlink()
    if lead is not None:
        first = lead()
        for sec in first:
            write(sec)
        sections = first + sections
    vocabs = guide_order(
        sorted({str(x) for sec in sections for t in sec.raw for x in (t.df["vocab"] if "vocab" in t.df else [])})
    )
    v = versions()
    code = code_block(v)
    links = {x: f"vocab/{x}.html" for x in vocabs}
    empty = Verdict(["No census results yet: run `make report`."], pd.DataFrame(), (0, 0))
    shown = vt or empty
    env = environment()
    title = "llama.cpp ↔ llguidance bridge audit"
    rec = (
        {"call": shown.recommendation["call"], "said": recommendation_md(shown.recommendation)}
        if shown.recommendation
        else None
    )
    repro_md = repro.markdown(res)
    tested_md = tested.section_markdown()
    # reports/html/ is generated and git-ignored: the committed page says so once instead of linking it
    notebooks_note = (
        ""
        if not committed
        else (
            "Each analysis's executed notebooks, one per input, are written by `make report` under reports/html/ (not "
            "committed)."
        )
    )
    page = env.get_template("index.html.j2").render(
        title=title,
        verdict={
            "sentences": shown.sentences,
            "table": shown.table(links).html if not shown.df.empty else "",
            "recommendation": rec,
            "disagreements": shown.disagreements,
            "reproduced": shown.reproduced if shown.reproduced[1] else None,
        },
        failed=failed,
        code=code,
        bridges_summary=BRIDGES_SUMMARY,
        sections=sections,
        vocabs=vocabs,
        glossary=GLOSSARY,
        repro=repro_md,
        tested=tested_md,
        notebooks_note=notebooks_note,
        comment=vt is not None,
    )
    intro = (
        f"Every table of the review guide for the llguidance token-bytes / tokenize_fn fix, measured by this suite "
        f"(`make report`) on the vocab fixtures vendored in llama-cpp-python {v['llama-cpp-python']}, through "
        f"llguidance {v['llguidance']}. Section numbers are the guide's. The same tables, with plots and every raw "
        f"table: index.html; the review in two minutes: pr-comment.md."
    )
    md = env.get_template("pr-review-tables.md.j2").render(
        intro=intro,
        verdict={
            "sentences": shown.sentences,
            "markdown": shown.table().markdown if not shown.df.empty else "",
            "recommendation": rec,
            "disagreements": shown.disagreements,
            "reproduced": shown.reproduced,
        },
        failed=failed,
        code=code,
        sections=sections,
        glossary=GLOSSARY,
        repro=repro_md,
        tested=tested_md,
    )
    if vt is not None:
        write_atomic(out / "pr-comment.md", comment(vt, res))
    write_atomic(out / "pr-review-tables.md", md)
    write_atomic(out / "index.html", page)
    vocab_pages(out, sections, vocabs, vt, res, link_notebooks=not committed)
    write_json(out / "run.json", {"versions": v, "failed": failed})
    return failed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Gather the per-vocab results into the reviewer-facing report.")
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--out", type=Path, default=REPORTS)
    a = ap.parse_args(argv)
    t0 = time.monotonic()
    try:
        failed = build(a.results, a.out)
    except OSError as e:  # a full disk or a read-only folder: one line naming the path
        print(f"report: {e.filename or a.out}: {e.strerror or e}", file=sys.stderr)
        return 1
    try:  # run metadata for the benchmark (bench.report_regeneration), beside the runs' own
        write_json(a.results / ".timing" / "report.json", {"wall": round(time.monotonic() - t0, 4)})
    except OSError:
        pass
    print(f"report written to {a.out.relative_to(ROOT) if a.out.is_relative_to(ROOT) else a.out}", flush=True)
    if failed:
        for f in failed:
            print(f"FAILED {f.get('notebook')}/{f.get('vocab')}: {f.get('error')}", file=sys.stderr)
        return 1
    return 0
