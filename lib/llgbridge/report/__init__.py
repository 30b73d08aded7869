"""Gather the per-vocab results into the reviewer-facing report.

    python -m llgbridge.report [--results DIR] [--out DIR]

Writes, each through a temporary name, under the output folder (default `reports/`):
`index.html` (the recommendation and where the suite finds the guide wrong first, then the
verdict, the repro commands, what was tested, and the guide's tables in the guide's order), one
page per vocab (`vocab/NAME.html`), `pr-comment.md` (the review as one GitHub comment),
`pr-review-tables.md`, `tables/*.csv`, and `run.json` (versions and failed inputs: run metadata
never goes into a table). Both Markdown files go through `gfm`, so GitHub renders them as
written. Tables are sorted and carry no timestamps, so two runs on the same results give the
same bytes. Exits 1, naming each failed input, when
any run failed.

The flow is one way: `results.load` (the only reader of result files, which turns a bad file
into a failed input), called once per analysis by one `PageData` (`data.py`) -> one `Section` per
analysis (its package's `section.py` under `analyses/`, found through the registry; the
report's own `beyond.py` and `review.py`, then `verdict.py`, `story.py`, `repro.py`, `tested.py`
and `comment.py`), built
from `Table`s whose `Cell`s carry their colours (`table.py`) -> the templates in
`llgbridge/templates/`, which render the HTML and the Markdown from the same `Table` objects, so
the two cannot disagree (`pages.py`). A section that raises becomes a failed input too; the
others are still written. No module here is in `results.SHARED_CODE` or `results.MODULES`: editing the
report reruns no analysis.
"""

from __future__ import annotations

from ..analyses.census.section import census_section
from ..analyses.corpus.section import corpus_section
from ..analyses.exactness.section import exactness_section, witness_kind
from ..analyses.forced.section import forced_section
from ..analyses.leak.section import leak_section
from ..analyses.matrix.section import matrix_section
from ..analyses.native.section import native_section
from ..analyses.probe.section import probe_section
from ..analyses.server.section import server_section
from ..analyses.soundness.section import soundness_section
from .beyond import beyond_section
from .data import PageData
from .pages import PAGE, code_block, inputs_table, main, sections, versions, write_report
from .review import review_section
from .story import vocab_story
from .table import Cell, Section, Table, html_table, md_table
from .verdict import Verdict, guide_figures, verdict

__all__ = [
    "PageData",
    "Cell",
    "Table",
    "Section",
    "md_table",
    "html_table",
    "write_report",
    "main",
    "PAGE",
    "sections",
    "verdict",
    "Verdict",
    "guide_figures",
    "vocab_story",
    "versions",
    "code_block",
    "inputs_table",
    "witness_kind",
    "census_section",
    "leak_section",
    "forced_section",
    "probe_section",
    "native_section",
    "matrix_section",
    "server_section",
    "beyond_section",
    "exactness_section",
    "soundness_section",
    "corpus_section",
    "review_section",
]
