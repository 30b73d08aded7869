"""The pages as a reader sees them: laid out by a real browser (headless Chromium) at 1400 × 900,
every table cell shows its whole text, no word is broken inside, no page scrolls sideways, and
every relative link leads to a file that is there.

A text's layout is not in the HTML: a cell clipped mid-word, a word split over two lines or a label
lying over its neighbour shows only once a browser has laid the page out, so the pages are loaded
one after the other in an iframe of the reader's width inside a probe page (file:// access between
the two is allowed by a flag), and the probe reads the layout back through the DOM. Every
`<details>` is opened first, so the collapsed tables are laid out too.

No browser library is needed: Chromium's `--dump-dom` prints the probe page once its script has
run, the findings in one attribute. Where Chromium is missing, the test is skipped, except on CI
(`CI=true`), where it fails in one line: `.ci/run` installs it.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest

from llgbridge.paths import REPORTS

WIDTH, HEIGHT = 1400, 900
COMMITTED = [REPORTS / "index.html", *sorted(REPORTS.glob("engines.html")), *sorted((REPORTS / "vocab").glob("*.html"))]

# Runs in the probe page: loads each page in turn into the iframe and reads its layout back.
PROBE_JS = r"""
const PAGES = %s, found = [], f = document.getElementById('f');
let i = 0;
function words(cell) {
  // ([the words broken inside], the box their glyphs cover): the words are Unicode's (the
  // browser's own word segmenter: `forced_literal` is one word, Thai is split by its dictionary),
  // so a line may break between words (at a space, after a hyphen or a bracket), never inside one;
  // a break at <wbr> splits the text node, so it is never inside a word either. Spaces are left out
  // of the box: at a line's end they hang, unseen.
  const broken = [], box = {left: Infinity, right: -Infinity, top: Infinity, bottom: -Infinity};
  const d = cell.ownerDocument, walk = d.createTreeWalker(cell, NodeFilter.SHOW_TEXT), range = d.createRange();
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    for (const w of words.segmenter.segment(n.data)) {
      if (!w.segment.trim()) continue;
      range.setStart(n, w.index); range.setEnd(n, w.index + w.segment.length);
      const rects = [...range.getClientRects()].filter(r => r.width > 0);
      for (const r of rects) {
        box.left = Math.min(box.left, r.left); box.right = Math.max(box.right, r.right);
        box.top = Math.min(box.top, r.top); box.bottom = Math.max(box.bottom, r.bottom);
      }
      const tops = rects.map(r => r.top).sort((a, b) => a - b);
      if (w.isWordLike && tops.length > 1 && tops[tops.length - 1] - tops[0] > 3) broken.push(w.segment);
    }
  }
  return [broken, box];
}
words.segmenter = new Intl.Segmenter('en', {granularity: 'word'});
function check(d) {
  const root = d.documentElement, out = {height: root.scrollHeight, cells: 0, problems: [], links: []};
  d.querySelectorAll('details').forEach(x => { x.open = true; });
  if (root.scrollWidth > root.clientWidth)
    out.problems.push(`the page is ${root.scrollWidth} px wide: it scrolls sideways in ${root.clientWidth} px`);
  for (const cell of d.querySelectorAll('td, th')) {
    const box = cell.getBoundingClientRect();
    if (!box.width) continue;
    out.cells += 1;
    const text = cell.textContent.trim().replace(/\s+/g, ' ').slice(0, 60), why = [];
    if (cell.scrollWidth > cell.clientWidth + 1)
      why.push(`its content is ${cell.scrollWidth - cell.clientWidth} px wider than its box`);
    const [broken, c] = words(cell);
    if (c.right > box.right + 1 || c.left < box.left - 1) {
      const over = [...cell.parentElement.children].filter(o => o !== cell).map(o => o.getBoundingClientRect())
        .filter(o => o.left < c.right - 1 && o.right > c.left + 1 && o.top < c.bottom && o.bottom > c.top);
      why.push(over.length ? 'its text lies over its neighbour' : 'its text runs out of its box');
    }
    if (broken.length) why.push('a word broken inside: ' + broken.slice(0, 3).map(w => JSON.stringify(w)).join(', '));
    if (why.length) out.problems.push(`cell ${JSON.stringify(text)}: ${why.join('; ')}`);
  }
  for (const a of d.querySelectorAll('a[href], img[src], link[href], script[src]')) {
    const at = a.getAttribute('href') ?? a.getAttribute('src');
    if (/^([a-z][a-z0-9+.-]*:|#)/i.test(at)) continue;  // absolute, or a place on the same page
    out.links.push([at, new URL(at, d.baseURI).href]);
  }
  return out;
}
f.onload = function () {
  let got;
  try { got = check(f.contentDocument); } catch (e) { got = {error: String(e)}; }
  found.push(got);
  i += 1;
  if (i < PAGES.length) f.src = PAGES[i];
  else document.body.setAttribute('data-out', btoa(unescape(encodeURIComponent(JSON.stringify(found)))));
};
f.src = PAGES[0];
"""


def chromium() -> str:
    """The browser, or the test's one line on why there is none."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    why = "no chromium on PATH: the pages' layout cannot be checked (apt-get install chromium)"
    if os.environ.get("CI") == "true":
        pytest.fail(why, pytrace=False)
    pytest.skip(why)


def dump_dom(probe: Path, tmp: Path, height: int, seconds: int) -> subprocess.CompletedProcess[str]:
    """Headless Chromium's DOM of `probe` after its scripts ran, in a window WIDTH px wide (plus the
    frame's margin): the one command every page test lays a page out with."""
    cmd = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--allow-file-access-from-files",
        f"--user-data-dir={tmp / 'profile'}",
        f"--window-size={WIDTH + 100},{height + 100}",
        # virtual time runs ahead while the pages are idle: the budget only bounds a page that never loads
        f"--virtual-time-budget={seconds * 1000}",
        "--dump-dom",
        probe.as_uri(),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=seconds)


def layout(pages: list[Path], tmp: Path) -> dict[Path, dict[str, Any]]:
    """Each page's layout as Chromium reads it at WIDTH × HEIGHT: its height, cells checked, the
    problems found (one line each) and its relative links (as written, and resolved)."""
    urls = [p.resolve().as_uri() for p in pages]
    probe = tmp / "probe.html"
    probe.write_text(
        f"<!doctype html><html><body><iframe id=f style='width:{WIDTH}px;height:{HEIGHT}px'></iframe>"
        f"<script>{PROBE_JS % json.dumps(urls)}</script></body></html>",
        encoding="utf-8",
    )
    done = dump_dom(probe, tmp, HEIGHT, 600)
    m = re.search(r'data-out="([^"]*)"', done.stdout)
    assert m, f"the probe page did not finish (exit {done.returncode}): {done.stderr[-2000:]}"
    found = json.loads(base64.b64decode(m.group(1)).decode("utf-8"))
    assert len(found) == len(pages), found
    return dict(zip(pages, found))


def dead_links(page: dict[str, Any]) -> list[str]:
    """The relative links of a laid-out page whose file is not there."""
    dead = []
    for written, resolved in page["links"]:
        url = urlparse(resolved)
        if url.scheme == "file" and not Path(unquote(url.path)).exists():
            dead.append(f"link {written!r}: no such file")
    return dead


def problems(page: dict[str, Any]) -> list[str]:
    assert "error" not in page, page
    return page["problems"] + dead_links(page)


def test_the_committed_pages_show_every_cell_whole(tmp_path: Path) -> None:
    """The index and every vocab page, with their collapsed tables opened (the guide's table 4.3 had
    "gemma3-270m+space-prefix (re" over "137542/262144", and "force d_lite ral" broken inside)."""
    said = []
    for page, got in layout(COMMITTED, tmp_path).items():
        assert got["cells"], f"{page.name}: no table cell laid out"
        found = problems(got)
        if found:
            said.append(f"{page.relative_to(REPORTS)}: {len(found)} problems, the first: " + "; ".join(found[:3]))
    assert not said, f"at {WIDTH} px:\n" + "\n".join(said)


WHATIF_VOCAB = "deepseek-coder"  # neither bug A nor the leak shows there: both figures' axes are linear


def test_a_whatif_page_shows_every_cell_whole_and_says_its_axes(tmp_path: Path) -> None:
    """A what-if's page, rendered here from the census and the leak test on a vocab neither bug
    touches: laid out as the committed pages are, and no caption or label says "log axis" over
    the linear axes its bars of 0 are drawn on."""
    from conftest import bridge, vocab

    from llgbridge import nb, report
    from llgbridge.analyses.census import compute as census
    from llgbridge.analyses.leak import compute as leak
    from llgbridge.grammars import LEAK_GRAMMAR

    results, out = tmp_path / "results", tmp_path / "whatif" / f"{WHATIF_VOCAB}-layout"
    v = vocab(WHATIF_VOCAB)
    nb.write_result(str(results), "census", WHATIF_VOCAB, census.run_census(v).to_json())
    truth = bridge(WHATIF_VOCAB, "truth")
    leaks = [leak.leak_test(bridge(WHATIF_VOCAB, b), truth, LEAK_GRAMMAR) for b in ("upstream", "fixed")]
    nb.write_result(str(results), "leak", WHATIF_VOCAB, leak.leak_payload(v, LEAK_GRAMMAR, leaks, {}))
    subject = {"file": v.path.name, "name": WHATIF_VOCAB, "overrides": []}
    report.write_report(results, out, bench_csv=out / "bench.csv", subject=subject)
    page = out / "index.html"
    text = page.read_text(encoding="utf-8")
    figures = re.findall(r"<figure>(.*?)</figure>", text, re.S)
    assert len(figures) == 2, len(figures)
    for fig in figures:
        # matplotlib writes each text it draws as a comment beside its glyphs: the axis label among them
        assert "log axis" not in fig and "$\\mathdefault{10^" not in fig, fig[-600:]
    got = layout([page, *sorted((out / "vocab").glob("*.html"))], tmp_path)
    found = [f"{p.name}: {x}" for p, g in got.items() for x in problems(g)]
    assert not found, "\n".join(found)


def test_a_pages_link_to_the_docs_leads_there_from_where_the_page_is() -> None:
    """The beyond section's fragment, rendered for a what-if's page, two folders under reports/
    (three, the file without its overrides), where its `../docs/native.md` led nowhere: every
    relative link it writes leads to a file from there."""
    from llgbridge.report.data import PageData
    from llgbridge.report.prose import blocks

    where = REPORTS / "whatif" / "mine-0123456789ab"
    chat = {"error": "e", "vocabs": ["mine"], "builds": 6, "all_builds": 6, "causes": {"mine": "c"}}
    for out in (REPORTS, where, where / "without"):
        res = PageData(out=out)
        docs = {"native": res.doc_link("native.md"), "server": res.doc_link("server.md")}
        refused = {"chat": chat, "n": 1, "vocabs": ["mine"]}
        said = blocks("beyond", c=None, d=None, everywhere=None, patches=res.patches_link, refused=refused, docs=docs)
        links = re.findall(r"\]\(([^)#]+)\)", "".join(said.values()))
        assert {Path(x).name for x in links} >= {"native.md", "server.md"}, links
        # the folders need not exist: a browser follows a link by its path alone
        assert all(Path(os.path.normpath(out / x)).exists() for x in links), (out, links)
    assert PageData(out=REPORTS).doc_link("native.md") == "[docs/native.md](../docs/native.md)"


def legend_overlaps(fig: Any) -> list[str]:
    """The texts of `fig` (titles, axis labels, ticks, printed values) that a legend lies over."""
    from matplotlib.text import Text

    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()] + list(fig.legends)
    own = {id(x) for lg in legends for x in lg.findobj(Text)}
    boxes = [lg.get_window_extent(r) for lg in legends]
    return [
        t.get_text()
        for t in fig.findobj(Text)
        if id(t) not in own and t.get_visible() and t.get_text().strip()
        for b in boxes
        if t.get_window_extent(r).overlaps(b)
    ]


def test_no_legend_lies_over_a_label() -> None:
    """The figures drawn from the committed tables and bench snapshot: the corpus chart's "µs per
    mask (log)" lay under its legend in all three panels, and the soundness bars' legend over
    gemma3-270m+space-prefix's count."""
    import pandas as pd

    import llgbridge.report  # noqa: F401 - the package first: a section module alone meets itself half-made
    from llgbridge.analyses.corpus.section import MASKBENCH_US, MaskTimes, mask_time_figure
    from llgbridge.report.plots import bar_figure, pyplot

    tables = REPORTS / "tables"
    snap = json.loads((REPORTS / "bench-corpus-timing.json").read_text(encoding="utf-8"))
    times = MaskTimes(
        {t["vocab"] for t in snap["timing"]},
        snap["hist_edges_us"],
        {(t["vocab"], t["bridge"]): t for t in snap["timing"]},
        dict(snap["hist"]),
    )
    figures = {
        "leak": bar_figure(pd.read_csv(tables / "leak.csv"), "allowed_illegal", "leak", "tokens (log axis)"),
        "soundness": bar_figure(
            pd.read_csv(tables / "soundness.csv"), "under", "soundness", "pairs (log axis)", steps="steps"
        ),
        "corpus mask time": mask_time_figure(times, MASKBENCH_US),
    }
    try:
        over = {name: legend_overlaps(fig) for name, fig in figures.items()}
    finally:
        for fig in figures.values():
            pyplot().close(fig)
    assert over == {name: [] for name in figures}


def test_a_linear_axis_is_not_called_log() -> None:
    import pandas as pd

    from llgbridge.report.plots import bar_figure, on_axis, pyplot

    zeros = pd.DataFrame({"vocab": ["mine", "mine"], "bridge": ["upstream", "fixed"], "under": [0, 0]})
    fig = bar_figure(zeros, "under", "t", "(step, token) pairs (log axis; each count printed)")
    try:
        assert fig.axes[0].get_xscale() == "linear"
        assert fig.axes[0].get_xlabel() == "(step, token) pairs (each count printed)"
    finally:
        pyplot().close(fig)
    caption = "every walk (log axis); a bridge at 0 (log axis, the count printed) is named"
    assert on_axis(caption, True) == caption
    assert on_axis(caption, False) == "every walk; a bridge at 0 (the count printed) is named"


SCREENS = 12  # the index a reviewer reads, at most this many screens of HEIGHT, its details closed


def test_the_index_is_read_in_at_most_twelve_screens(tmp_path: Path) -> None:
    got = layout([REPORTS / "index.html"], tmp_path)[REPORTS / "index.html"]
    assert got["height"] <= SCREENS * HEIGHT, f"index.html is {got['height']} px: {got['height'] / HEIGHT:.1f} screens"
