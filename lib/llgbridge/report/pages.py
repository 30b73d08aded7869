"""Assembly: every section built from one `PageData`, then the pages, the Markdown, the tables and
run.json written, each through a temporary name."""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path, PurePosixPath
from typing import Any

import pandas as pd

from ..analyses import ANALYSES
from ..analyses.server.llama_server import MEMORY_HEADROOM, REQUEST_TIMEOUT
from ..fixtures import refused as refused_inputs
from ..paths import REPORTS, RESULTS, ROOT, write_atomic, write_json
from ..results import SCHEMAS
from ..run import CELL_TIMEOUT, MEMORY_GIB
from . import repro, tested
from .claims import as_json as claims_json
from .claims import claims, guide_notes
from .comment import comment
from .coverage import PARTIAL, Coverage, coverage
from .data import PageData
from .glossary import GLOSSARY
from .story import vocab_story
from .table import PR_BASE, PR_BRANCH, PR_TITLE, Section, Table, guide_order, html_table, overridden_note
from .templating import environment
from .verdict import Verdict, recommendation_md, verdict

# sections about code other than the PR's: a page of their own (`APART_PAGE`), linked from the index,
# so the review's page stays about the PR
APART = ("engines", "engines_e2e")
APART_PAGE = "engines.html"
APART_TITLE = "Other engines on llama.cpp: their own bridges from the same vocabs"
APART_INTRO = (
    "Not the PR's code: the libraries that build their own token table from a llama.cpp vocab, audited like the "
    "bridges of the review, each with its reproducer."
)
# the report's own sections, over the other analyses' results, by their place among the analyses'
# (`Analysis.page`): "beyond" after the server's, "review" last
OWN_SECTIONS = {"beyond": 75, "review": 10_000}
# the page's order: each analysis's section is its entry's module's `NAME_section`, found by its
# name (`Analysis.section_module`), so adding an analysis adds no line here
PAGE: tuple[tuple[str, str], ...] = tuple(
    (key, module)
    for _, key, module in sorted(
        [(a.page, a.name, a.section_module) for a in ANALYSES]
        + [(at, key, f"{__package__}.{key}") for key, at in OWN_SECTIONS.items()]
    )
)


@cache
def sections() -> tuple[tuple[str, Callable[[PageData], Section | None]], ...]:
    """Each section's function, in the page's order. Imported when a page is first drawn, not when
    this module is: a section imports the report's primitives, whose package imports this module,
    so a section imported first (a notebook, a test) would otherwise meet itself half-made."""
    return tuple((key, getattr(importlib.import_module(module), f"{key}_section")) for key, module in PAGE)


def versions(res: PageData) -> dict[str, str]:
    """What the results were computed with, as they record it (`results.recorded_versions`):
    never what is installed when the page is drawn (issue 48, break 2)."""
    return res.versions()


def versions_said(v: dict[str, str]) -> str:
    """The versions as the page lists them."""
    said = {
        **v,
        "llama.cpp": f"commit {v['llama.cpp'][:12]}" if v["llama.cpp"] != "not recorded" else v["llama.cpp"],
        "patches/": f"sha256 {v['patches']}" if v["patches"] != "not recorded" else v["patches"],
    }
    said.pop("patches")
    return ", ".join(f"{k} {val}" for k, val in said.items())


BRIDGES_SUMMARY = "The four bridges: each one's token table and tokenize_fn"


def code_block(v: dict[str, str]) -> str:
    """What code was tested: a paragraph, then the bridges' table (the page shows it collapsed
    under `BRIDGES_SUMMARY`, after the paragraph's first blank line)."""
    commit = v["llama.cpp"] if v["llama.cpp"] != "not recorded" else ""
    return (
        f"**What is a port and what is compiled.** The bridges below are Python ports of `common/llguidance.cpp`, "
        f"field for field, driving the real llguidance {v['llguidance']} (its C API, from its wheel) and the real "
        f"llama.cpp (llama-cpp-python {v['llama-cpp-python']}). The section *The compiled code* runs the C++ itself: "
        f"`common/llguidance.cpp` before the PR (the upstream sampler), the same file with the PR applied from "
        f"`patches/`, and llama.cpp's own `test-grammar-llguidance`, and checks the port against the compiled sampler "
        f"step by step. llama.cpp is the tree that llama-cpp-python {v['llama-cpp-python']} vendors"
        + (f" (commit {commit[:12]})" if commit else "")
        + f"; the PR's base is {PR_BASE} (the guide). The end-to-end matrix uses synthetic models unless marked real. "
        "Versions, as the results record them: " + versions_said(v) + ". Each analysis runs in a kernel bounded to "
        f"{MEMORY_GIB} GiB of address space and {CELL_TIMEOUT // 60} minutes a cell (its input fails in one line past "
        f"either); each llama-server to its model file and {MEMORY_HEADROOM >> 30} GiB, answering within "
        f"{REQUEST_TIMEOUT:.0f} s (the server section).\n\n"
        "| bridge | token table | `tokenize_fn` | what it is |\n|---|---|---|---|\n| `upstream` | "
        "`llama_detokenize(&t, 1, false, false)` | `llama_tokenize(add_special=false, parse_special=true)` | llama.cpp "
        "before the PR (the upstream sampler) |\n| `fixed` | `llama_token_to_piece(t, 0, false)` | kept only where the "
        "PR's three probes round-trip, else greedy | the PR |\n| `sentinel` | `llama_token_to_piece(t, 0, true)` | "
        "`llama_tokenize` with a sentinel byte prepended and stripped | llguidance's own `lltokenizer_from_vocab` |\n"
        '| `truth` | `llama_token_to_piece` | none (forcing off) | the yardstick for "legal" |\n'
    )


def inputs_table(res: PageData) -> pd.DataFrame:
    """Every (analysis, input) run: whether it succeeded, and the one-line error if not."""
    rows = []
    for name, _ in sections():
        ok, failed = res.load(name)
        rows += [{"analysis": name, "input": r["vocab"], "status": "ok", "error": ""} for r in ok]
        rows += [
            {"analysis": name, "input": r.get("vocab"), "status": "failed", "error": r.get("error", "")} for r in failed
        ]
    if not rows:
        return pd.DataFrame()
    return pd.DataFrame(rows).sort_values(["analysis", "input"], kind="stable").reset_index(drop=True)


def vocab_pages(
    w: Written, sections: list[Section], vocabs: list[str], vt: Verdict | None, res: PageData, link_notebooks: bool
) -> None:
    env = environment()
    out = w.out
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
        w.write(
            f"vocab/{v}.html",
            env.get_template("vocab.html.j2").render(
                vocab=v, parts=parts, verdict_row=row, story=story, notebooks_note=note
            ),
        )


# in the output folder: every file the last render wrote, with its sha256, and the parts (analyses)
# it had. A render removes only files listed there that it did not write again, and only while
# they still hold what was written: a user's file in reports/tables/ (or in the folder a symlink
# there points to) is never removed (issue 48, break 15). Committed with the report, so a fresh
# clone's first render knows what the committed one wrote.
MANIFEST = ".written"
# the folder a render writes into before it replaces the report's files (`Written`): a leftover
# one (a render killed mid-way) is never read, and the next render removes it
STAGE_PREFIX = ".render-"
# the failure banner's place at the top of index.html: a run that keeps the last complete report
# (`keep_parts`) rewrites only what lies between these
BANNER_START, BANNER_END = "<!-- run-banner -->", "<!-- /run-banner -->"
BANNER_LINES = 8  # causes said on the first screen; the rest under "Failed inputs"


def _sha256(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


class Written:
    """The files one render writes under `out`, and the previous render's (`MANIFEST`).

    A render is all or nothing: every file is written first into a new folder of its own
    (`stage`, inside `out`), and only once all of them are there does `commit` put them in place,
    each by an atomic rename, the ones already put back as they were if one cannot be: a render that
    stops half-way (a full disk, a file it may not replace, a template that raises) leaves `out`
    exactly as it was, where it had written the tables of the new render beside the pages of the
    old one."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.files: dict[str, str] = {}
        try:
            before = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            before = {}
        files = before.get("files") if isinstance(before, dict) else None
        parts = before.get("parts") if isinstance(before, dict) else None
        self.before: dict[str, str] = {str(k): str(v) for k, v in files.items()} if isinstance(files, dict) else {}
        self.parts_before: list[str] = [str(x) for x in parts] if isinstance(parts, list) else []
        # a manifest written before renders said whether they were full: its report is taken as full
        self.full_before = bool(before.get("full", True) if self.before else False)
        out.mkdir(parents=True, exist_ok=True)
        self.stage = Path(tempfile.mkdtemp(prefix=STAGE_PREFIX, dir=out))

    def write(self, rel: str, text: str) -> None:
        raw = text.encode()
        write_atomic(self.stage / rel, raw)
        self.files[rel] = _sha256(raw)

    def discard(self) -> None:
        shutil.rmtree(self.stage, ignore_errors=True)

    def commit(self, parts: list[str], full: bool = True) -> None:
        """Every staged file, and the manifest, put in place; on the first that cannot be, those
        already put back as they were and OSError raised naming it (`out` then holds what it held).
        `full`: whether the render covered the full input set (`coverage`), so that a partial one
        never goes over it unasked."""
        manifest = {"files": dict(sorted(self.files.items())), "parts": sorted(parts), "full": full}
        self.write(MANIFEST, json.dumps(manifest, indent=1))
        self.files.pop(MANIFEST)
        done: list[tuple[Path, bytes | None]] = []
        try:
            for rel in [*sorted(self.files), MANIFEST]:
                target = self.out / rel
                old = target.read_bytes() if target.is_file() else None
                # a rename where both lie on one file system; a folder that is a symlink to another
                # one (tables/ kept elsewhere) gets the bytes through a temporary name there
                try:
                    write_atomic(target, (self.stage / rel).read_bytes())
                except OSError as e:  # named as the report's file, not as the temporary name beside it
                    raise OSError(e.errno, e.strerror or str(e), str(target)) from None
                done.append((target, old))
        except OSError:
            for target, old in reversed(done):
                try:
                    if old is None:
                        target.unlink(missing_ok=True)
                    else:
                        write_atomic(target, old)
                except OSError:
                    pass
            raise
        finally:
            self.discard()

    def remove_stale(self, under: str = "") -> list[str]:
        """Remove each file under `under` that the previous render wrote and this one did not,
        where it still holds the bytes written; return those left because they changed since."""
        left = []
        for rel, sha in sorted(self.before.items()):
            pure = PurePosixPath(rel)
            if rel in self.files or not rel.startswith(under) or pure.is_absolute() or ".." in pure.parts:
                continue
            p = self.out / rel
            try:
                if p.is_symlink() or not p.is_file():
                    continue
                if _sha256(p.read_bytes()) == sha:
                    p.unlink()
                else:
                    left.append(rel)
            except OSError:
                left.append(rel)
        return left


def banner(failed: list[dict[str, Any]], kept: list[str] | None = None, partial: str = "") -> dict[str, Any] | None:
    """The first screen's word on what this report lacks (None when nothing failed and it is
    full): one line per cause, naming its inputs and analyses; `kept`, the parts this run could not
    make at all, for which the last complete report was left as it was; `partial`, what a report
    made from fewer inputs or analyses than the full set lacks (`Coverage.said`)."""
    if not failed:
        return {"head": partial, "lines": [], "more": ""} if partial else None
    causes: dict[str, tuple[list[str], list[str]]] = {}
    for f in failed:
        notebooks, inputs = causes.setdefault(str(f.get("error") or "failed"), ([], []))
        for seen, x in ((notebooks, str(f.get("notebook"))), (inputs, str(f.get("vocab")))):
            if x not in seen:
                seen.append(x)
    lines = []
    for error, (notebooks, inputs) in causes.items():
        who = ", ".join(inputs) if len(inputs) <= 4 else f"{len(inputs)} inputs ({', '.join(inputs[:3])}, …)"
        what = ", ".join(notebooks) if len(notebooks) <= 4 else f"{len(notebooks)} analyses"
        lines.append(f"{who} ({what}): {error}")
    runs = f"{len(failed)} run{'' if len(failed) == 1 else 's'}"
    if kept:
        head = (
            f"This page is the last complete report: this run could not make {', '.join(kept)} for any input, so "
            f"it left every page and table here as it was ({runs} failed)."
        )
    else:
        head = (
            f"This report is incomplete: {runs} failed, and what {'it' if len(failed) == 1 else 'they'} would show is "
            f"missing from every table below. Run it again once each cause is fixed."
        )
    more = len(lines) - BANNER_LINES
    return {
        "head": f"{partial} {head}" if partial else head,
        "lines": lines[:BANNER_LINES],
        "more": f"and {more} more cause{'' if more == 1 else 's'}, each under Failed inputs" if more > 0 else "",
    }


def splice_banner(index: Path, said: dict[str, Any] | None) -> None:
    """Put `said` (a `banner`) in place of the banner of the page at `index`, the rest of the page
    left as it was (a page drawn before there was a banner gets it at the top of its body)."""
    try:
        page = index.read_text(encoding="utf-8")
    except OSError:
        return
    block = environment().get_template("banner.html.j2").render(banner=said)
    i, j = page.find(BANNER_START), page.find(BANNER_END)
    if 0 <= i < j:
        page = page[:i] + block.strip() + page[j + len(BANNER_END) :]
    else:
        page = page.replace("<body>", "<body>\n" + block.strip(), 1)
    write_atomic(index, page)


def made_sections(res: PageData) -> tuple[list[Section], list[dict[str, Any]], set[str]]:
    """Every section of the page (`sections()`), the failed inputs, and the sections that raised."""
    failed: list[dict[str, Any]] = []
    made: list[Section] = []
    broken: set[str] = set()
    for name, fn in sections():
        _, f = res.load(name)
        failed += f
        try:
            sec = fn(res)
        except Exception as e:  # noqa: BLE001 - one analysis must not cost the others their section
            broken.add(name)
            failed.append(
                {
                    "notebook": name,
                    "vocab": "(all)",
                    "error": f"the report could not build this section: {type(e).__name__}: {e}",
                }
            )
            continue
        if sec is not None:
            made.append(sec)
    return made, failed, broken


def parts_made(res: PageData, broken: set[str]) -> list[str]:
    """The analyses this render has at least one usable result of, and a section for."""
    return [a for a in SCHEMAS if a not in broken and res.load(a)[0]]


def parts_lacking(res: PageData, before: list[str], broken: set[str]) -> list[str]:
    """The parts the last render had that this one could not make at all: every input of the
    analysis failed (none is left out for being gone: those the page drops), or its section raised."""
    return [a for a in before if a in broken or (a in SCHEMAS and not res.load(a)[0] and res.load(a)[1])]


class Rendered(list[dict[str, Any]]):
    """The failed inputs of a render, and the folder it wrote (`out/partial/` for a partial one)."""

    def __init__(self, failed: list[dict[str, Any]], out: Path) -> None:
        super().__init__(failed)
        self.out = out


class Kept(list[dict[str, Any]]):
    """The failed inputs of a render that kept the last complete report (`keep_last`), and why."""

    def __init__(self, failed: list[dict[str, Any]], parts: list[str]) -> None:
        super().__init__(failed)
        self.parts = parts


def keep_last(out: Path, res: PageData, failed: list[dict[str, Any]], lacking: list[str]) -> Kept:
    """The issue-49 rule: a run that could not make a whole part leaves the last complete report
    as it was, its first screen (the banner) and run.json saying what this run lacks."""
    said = banner(failed, lacking)
    splice_banner(out / "index.html", said)
    write_json(out / "run.json", {"versions": versions(res), "failed": failed, "kept": lacking})
    return Kept(failed, lacking)


def _shown(out: Path) -> str:
    full = out.resolve()
    return str(full.relative_to(ROOT)) if full.is_relative_to(ROOT) else str(out)


def _verdict(res: PageData, failed: list[dict[str, Any]]) -> Any:
    """The verdict, or None with a failed row saying why: the verdict must not cost the report."""
    try:
        return verdict(res)
    except Exception as e:  # noqa: BLE001 - the verdict must not cost the report either
        failed.append(
            {
                "notebook": "verdict",
                "vocab": "(all)",
                "error": f"the report could not build the verdict: {type(e).__name__}: {e}",
            }
        )
        return None


def _staging(res: PageData, cov: Coverage, replace_full: bool) -> Written:
    """Where this render is staged: `res.out`, or its `partial/` (then `res.out` is moved there)."""
    w = Written(res.out)
    if cov.partial and w.full_before and not replace_full:
        # a narrowed render (INPUTS=, ANALYSES= on results that never held the rest) beside the
        # committed full report, never over it: it deleted 31 of its files and recommended approval
        w.discard()
        res.out = res.out / PARTIAL
        w = Written(res.out)
        print(
            f"report: a partial render ({cov.what()}) went to {_shown(res.out)}, and the full "
            f"report in {_shown(res.out.parent)} was left as it is (REPLACE_FULL=1 writes a partial report over it)",
            file=sys.stderr,
            flush=True,
        )
    return w


def write_report(
    results: Path = RESULTS,
    out: Path = REPORTS,
    bench_csv: Path = REPORTS / "bench.csv",
    lead: Callable[[Path], list[Section]] | None = None,
    keep_parts: bool | None = None,
    subject: dict[str, Any] | None = None,
    replace_full: bool = False,
) -> list[dict[str, Any]]:
    """Write the report; return the failed inputs (a `Rendered`: the folder written too). Every result
    is read once, into the one `PageData` the sections, the verdict and the vocab pages share;
    `bench_csv` is the `make bench` snapshot they quote (its files beside it); `lead` makes the
    sections that lead the page, once this render's tables are written, since it may read them: it
    is given their folder (a what-if's comparison with the file without its overrides). Nothing in
    `out` changes until every file is written (`Written.commit`): an OSError leaves it as it was,
    naming the file. `keep_parts` (default: when `out` is the main report) keeps the last complete
    report where a part the last render had could not be made for any input (`keep_last`). A partial
    render (`coverage`) goes to `out/partial/` where `out` holds a full report, unless
    `replace_full`."""
    res = PageData(results, out, bench_csv, subject)
    sections, failed, broken = made_sections(res)
    # a file name Make cannot carry never became a target: it is a failed input all the same
    if results.resolve() == RESULTS.resolve():
        failed += refused_inputs()
    for line in res.dropped():  # a result whose input file is gone: left out, and said
        print(line, file=sys.stderr)
    vt = _verdict(res, failed)
    cov = coverage(res)
    w = _staging(res, cov, replace_full)
    out = res.out
    lacking = parts_lacking(res, w.parts_before, broken)
    if lacking and (keep_parts if keep_parts is not None else out.resolve() == REPORTS.resolve()):
        w.discard()
        return keep_last(out, res, failed, lacking)
    try:
        sections = write_sections(w, res, sections, lead)
        write_pages(w, res, sections, failed, vt)
    except BaseException:
        w.discard()
        raise
    w.commit(parts_made(res, broken), full=not cov.partial)
    for rel in w.remove_stale():
        print(f"report: {_shown(out / rel)} left as it is: it changed since a render wrote it", file=sys.stderr)
    for left in out.glob(STAGE_PREFIX + "*"):  # a render killed before it could remove its own
        shutil.rmtree(left, ignore_errors=True)
    try:  # run metadata, after the report is in place: its loss is said, and changes no page
        write_json(out / "run.json", {"versions": versions(res), "failed": failed})
    except OSError as e:
        print(f"report: {_shown(out / 'run.json')}: {e.strerror or e}: not written", file=sys.stderr)
    return Rendered(failed, out)


def write_sections(
    w: Written, res: PageData, sections: list[Section], lead: Callable[[Path], list[Section]] | None
) -> list[Section]:
    """Every section's tables and assets, and `inputs.csv`, staged; then `lead`'s, given the folder
    of this render's tables alone (no stale table of an earlier render among them); returns the
    sections, `lead`'s first."""
    out = w.out
    inputs = inputs_table(res)
    if not inputs.empty:
        w.write("tables/inputs.csv", inputs.to_csv(index=False, lineterminator="\n"))
    committed = out.resolve() == REPORTS.resolve()

    def write(sec: Section) -> None:
        # an input that is a model loaded with key overrides is said to be one under every table it is in
        for t in sec.views:
            note = overridden_note(t.df)
            if note and note not in t.note:
                t.note = f"{t.note}\n\n{note}".strip()
        for t in sec.raw:
            w.write(f"tables/{t.name}.csv", t.csv)
        for rel, text in sec.assets.items():
            svg_head = rel.endswith(".svg") and not text.startswith("<?xml")
            w.write(rel, '<?xml version="1.0" encoding="utf-8"?>\n' + text if svg_head else text)
        if sec.notebook:
            d = out / "html" / sec.notebook
            # only the pages of inputs this report has a result for: a page left by an input since
            # removed (or by a by-hand run) is not the report's
            have = {p.stem for p in (res.root / sec.notebook).glob("*.json")}
            # the committed report links none: reports/html/ is generated and git-ignored, so in a
            # clean checkout every such link would be dead; the page names the folder instead
            if not committed:
                sec.notebooks = [
                    (p.stem, f"html/{sec.notebook}/{p.name}") for p in sorted(d.glob("*.html")) if p.stem in have
                ]

    for sec in sections:
        write(sec)
    if lead is None:
        return sections
    # the folder holding this render's tables: only those, none an earlier render left behind
    first = lead(w.stage / "tables")
    for sec in first:
        write(sec)
    return first + sections


def write_pages(
    w: Written, res: PageData, sections: list[Section], failed: list[dict[str, Any]], vt: Verdict | None
) -> None:
    """index.html, pr-review-tables.md, pr-comment.md and the vocab pages."""
    committed = w.out.resolve() == REPORTS.resolve()
    vocabs = guide_order(
        sorted({str(x) for sec in sections for t in sec.raw for x in (t.df["vocab"] if "vocab" in t.df else [])})
    )
    v = versions(res)
    census_failed = [str(f.get("vocab")) for f in failed if f.get("notebook") == "census"]
    empty = Verdict(
        [
            f"No census result: the census failed on {', '.join(census_failed)} (the failed inputs below say why)."
            if census_failed
            else "No census results yet: run `make report`."
        ],
        pd.DataFrame(),
        (0, 0),
    )
    shown = vt or empty
    rec = (
        {"call": shown.recommendation["call"], "said": recommendation_md(shown.recommendation)}
        if shown.recommendation
        else None
    )
    apart = [sec for sec in sections if sec.key in APART]
    if apart:
        w.write(
            APART_PAGE,
            environment().get_template("apart.html.j2").render(title=APART_TITLE, intro=APART_INTRO, sections=apart),
        )
    common = {
        "failed": failed,
        "code": code_block(v),
        "sections": [sec for sec in sections if sec.key not in APART],
        "apart_page": APART_PAGE if apart else "",
        "glossary": GLOSSARY,
        "repro": repro.markdown(res),
        "tested": tested.section_markdown(),
        "subject": res.subject,
        "partial": coverage(res).said(),
    }
    found = claims(vt, res) if vt is not None else {}
    # what was tested, the comment's own sentence, opens the page's verdict too
    common["tested_said"] = found["tested"].text if "tested" in found and not res.subject else ""
    if vt is not None:
        # the page says what the comment says of the guide: one sentence each, from the claims
        vt.disagreements = [*guide_notes(found), *vt.disagreements]
        w.write("pr-comment.md", comment(vt, found, res))
        w.write("claims.json", claims_json(found))
    w.write("pr-review-tables.md", tables_markdown(shown, rec, v, {**common, "sections": sections}))
    w.write("index.html", index_page(shown, rec, vocabs, committed, vt is not None, common))
    vocab_pages(w, sections, vocabs, vt, res, link_notebooks=not committed)


def index_page(
    shown: Verdict,
    rec: dict[str, str] | None,
    vocabs: list[str],
    committed: bool,
    has_comment: bool,
    common: dict[str, Any],
) -> str:
    links = {x: f"vocab/{x}.html" for x in vocabs}
    # reports/html/ is generated and git-ignored: the committed page says so once instead of linking it
    notebooks_note = (
        ""
        if not committed
        else (
            "Each analysis's executed notebooks, one per input, are written by `make report` under reports/html/ (not "
            "committed)."
        )
    )
    return str(
        environment()
        .get_template("index.html.j2")
        .render(
            title=(
                f"What if: {common['subject']['name']}"
                if common.get("subject")
                else "llama.cpp ↔ llguidance bridge audit"
            ),
            pr={"title": PR_TITLE, "branch": PR_BRANCH, "base": PR_BASE},
            verdict={
                "sentences": shown.sentences,
                "table": shown.table(links).html if not shown.df.empty else "",
                "recommendation": rec,
                "disagreements": shown.disagreements,
                "reproduced": shown.reproduced if shown.reproduced[1] else None,
            },
            banner=banner(common["failed"], partial=common["partial"]),
            bridges_summary=BRIDGES_SUMMARY,
            vocabs=vocabs,
            notebooks_note=notebooks_note,
            comment=has_comment,
            **common,
        )
    )


def tables_markdown(shown: Verdict, rec: dict[str, str] | None, v: dict[str, str], common: dict[str, Any]) -> str:
    intro = (
        f"Every table of the review guide for the llguidance token-bytes / tokenize_fn fix, measured by this suite "
        f"(`make report`) on the vocab fixtures vendored in llama-cpp-python {v['llama-cpp-python']}: the compiled "
        f"code's tables name the llguidance each row links (llama.cpp's pin first), the Python port's run on "
        f"llguidance {v['llguidance']}. Section numbers are the guide's. The same tables, with plots and every raw "
        f"table: index.html; the review in two minutes: pr-comment.md."
    )
    return str(
        environment()
        .get_template("pr-review-tables.md.j2")
        .render(
            intro=intro,
            verdict={
                "sentences": shown.sentences,
                "markdown": shown.table().markdown if not shown.df.empty else "",
                "recommendation": rec,
                "disagreements": shown.disagreements,
                "reproduced": shown.reproduced,
            },
            **common,
        )
    )


def failure_lines(failed: list[dict[str, Any]]) -> list[str]:
    """One line per analysis and cause, naming its inputs: a build that could not start fails every
    input of its analysis with one cause, which is one line, not 22."""
    by: dict[tuple[str, str], list[str]] = {}
    for f in failed:
        by.setdefault((str(f.get("notebook")), str(f.get("error"))), []).append(str(f.get("vocab")))
    out = []
    for (notebook, error), inputs in by.items():
        who = (
            inputs[0]
            if len(inputs) == 1
            else f"{len(inputs)} inputs ({', '.join(inputs[:3])}{', …' * (len(inputs) > 3)})"
        )
        out.append(f"FAILED {notebook}/{who}: {error}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Gather the per-vocab results into the reviewer-facing report.")
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--out", type=Path, default=REPORTS)
    ap.add_argument(
        "--keep-going",
        action="store_true",
        help="exit 0 even when inputs failed (make report KEEP_GOING=1); the page still names each",
    )
    ap.add_argument(
        "--replace-full",
        action="store_true",
        help="write a partial report (fewer inputs or analyses than the full set) over the full one in --out "
        "(make report REPLACE_FULL=1); without it, it goes to OUT/partial/",
    )
    a = ap.parse_args(argv)
    t0 = time.monotonic()
    try:
        failed = write_report(a.results, a.out, replace_full=a.replace_full)
    except OSError as e:  # a full disk or a read-only folder: one line naming the path
        where = _shown(Path(e.filename)) if e.filename else _shown(a.out)
        print(f"report: {where}: {e.strerror or e}; nothing in {_shown(a.out)} was changed", file=sys.stderr)
        return 1
    try:  # run metadata for the benchmark (bench.report_regeneration), beside the runs' own
        write_json(a.results / ".timing" / "report.json", {"wall": round(time.monotonic() - t0, 4)})
    except OSError:
        pass
    if isinstance(failed, Kept):
        print(
            f"report: {', '.join(failed.parts)}: no input could be made, so {_shown(a.out)} keeps its last complete "
            f"report; only the banner at the top of its index.html was rewritten, to say what this run lacks",
            file=sys.stderr,
            flush=True,
        )
    else:
        print(f"report written to {_shown(failed.out if isinstance(failed, Rendered) else a.out)}", flush=True)
    if failed:
        for line in failure_lines(failed):
            print(line, file=sys.stderr)
        if a.keep_going:
            print(f"report: {len(failed)} failed run(s), and KEEP_GOING=1: exit status 0", file=sys.stderr)
            return 0
        return 1
    return 0
