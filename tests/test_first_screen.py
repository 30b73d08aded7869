"""What a reader meets first, on the committed pages: the index names the pull request it reviews and
links each glossary term of its lead to the entry; a stand-in's note is whole wherever it appears;
no quoted generation is cut inside the suite's own annotation."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from llgbridge.catalogue import overridden
from llgbridge.paths import REPORTS
from llgbridge.report.glossary import terms
from llgbridge.report.table import overridden_note

GUIDE_TEXT = Path(__file__).resolve().parents[2] / "shared" / "000_18c51097d446d5b9.txt"
# the guide's first lines, as it prints them (the expectation; the guide itself is read where it is beside)
GUIDE_TITLE = "llguidance token-bytes and tokenize_fn byte-exactness"
GUIDE_BRANCH, GUIDE_BASE = "llg-spm-tokenize", "030ebb55"


def _index() -> str:
    return (REPORTS / "index.html").read_text(encoding="utf-8")


def _lead(page: str) -> str:
    """The first screen: the intro, the recommendation, the notes on the guide, the verdict's items."""
    return page.split('<p class="legend">', 1)[0].split("</h1>", 1)[1]


def test_the_index_names_the_pull_request_it_reviews() -> None:
    if GUIDE_TEXT.exists():
        head = GUIDE_TEXT.read_text(encoding="utf-8")[:600]
        assert GUIDE_TITLE in head and f"Branch: {GUIDE_BRANCH}" in head and f"based on upstream {GUIDE_BASE}" in head
    intro = _lead(_index()).split('<section class="verdict"', 1)[0]
    intro = re.sub(r"<[^>]+>", "", intro)
    assert GUIDE_TITLE in intro and GUIDE_BRANCH in intro and GUIDE_BASE in intro
    assert "the guide" in intro


def _text_outside(html: str, tags: tuple[str, ...] = ("a", "code")) -> str:
    for t in tags:
        html = re.sub(rf"<{t}\b[^>]*>.*?</{t}>", " ", html, flags=re.S)
    return re.sub(r"<[^>]+>", " ", html)


def test_each_glossary_term_of_the_first_screen_links_to_its_entry() -> None:
    page = _index()
    lead = _lead(page)
    plain = _text_outside(lead)
    linked = set(re.findall(r'<a class="term" href="#([^"]+)"', lead))
    used = {ref for term, ref in terms() if re.search(rf"(?<![\w-]){re.escape(term)}(?![\w-])", plain)}
    # a term whose every use is a link leaves no plain use: it is in `linked`
    missing = [ref for ref in used if ref not in linked]
    assert missing == []
    assert linked and all(f'id="{ref}"' in page for ref in linked)


def test_a_stand_ins_note_is_whole() -> None:
    """Cut at the first colon, the note ended inside `bool:true`'s code span, whose backtick then ate
    the rest of the sentence."""
    for name, m in overridden().items():
        note = overridden_note(pd.DataFrame({"vocab": [name]}))
        assert all(o in note for o in m.overrides), note
        assert note.count("`") % 2 == 0, note


_CUT = re.compile(r"…\[\d+ more tokens(?! after the first violation at token \d+\])")


def test_no_quoted_generation_is_cut_inside_an_annotation() -> None:
    pages = [REPORTS / "index.html", *sorted((REPORTS / "vocab").glob("*.html")), REPORTS / "pr-comment.md"]
    cut = [(p.name, m.group(0)) for p in pages for m in _CUT.finditer(p.read_text(encoding="utf-8"))]
    assert cut == []


def test_a_bar_plot_of_zeros_draws_without_a_warning() -> None:
    """A what-if where the bug does not show gives bars of 0: on a log axis matplotlib warned
    "Data has no positive values, and therefore cannot be log-scaled" into the run's output."""
    import warnings

    from llgbridge.report.plots import bar_by_bridge

    df = pd.DataFrame({"vocab": ["mine", "mine"], "bridge": ["upstream", "fixed"], "allowed_illegal": [0, 0]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        svg = bar_by_bridge(df, "allowed_illegal", "illegal tokens", "tokens")
    assert svg.lstrip().startswith("<svg")


def test_a_census_plot_of_a_vocab_without_bug_a_draws_without_a_warning() -> None:
    """A what-if on a vocab bug A does not hit: the census figure's log axis made matplotlib warn
    into make test's output and a what-if's."""
    import warnings

    from llgbridge.analyses.census.section import census_figure

    df = pd.DataFrame({"vocab": ["mine"], "differing": [0], "n_tokens": [100]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        svg = census_figure(df)
    assert svg.lstrip().startswith("<svg")
