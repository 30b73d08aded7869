"""Issue 58, break 2: a report made from fewer inputs or analyses than the full set says so on its
first screen and in its comment, recommends nothing it did not measure, and never goes over a full
report unless asked in so many words (`make report REPLACE_FULL=1`).

The results are the session's real ones (`made_results`: every analysis on llama-spm alone); the
full set they are measured against is the input sets' own listing (`inputsets.input_sets`).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

from llgbridge import report
from llgbridge.inputsets import input_sets
from llgbridge.report.data import PageData
from llgbridge.report.verdict import verdict

FULL_PAGE = "<html><body><h1>the full report</h1></body></html>\n"


def _full_report(out: Path) -> None:
    """`out` as a full render leaves it: a page, and the manifest saying it was full."""
    out.mkdir(parents=True)
    (out / "index.html").write_text(FULL_PAGE)
    sha = hashlib.sha256(FULL_PAGE.encode()).hexdigest()
    manifest = {"files": {"index.html": sha}, "parts": ["census"], "full": True}
    (out / ".written").write_text(json.dumps(manifest))


def _first_screen(page: Path) -> str:
    body = page.read_text().split("<body", 1)[1].split(">", 1)[1]
    text = re.sub(r"<[^>]+>", " ", body.split("<h1>", 1)[0])
    return re.sub(r"\s+", " ", text).strip()


def test_a_partial_render_goes_beside_a_full_report_and_says_what_it_lacks(made_results: Path, tmp_path: Path) -> None:
    out = tmp_path / "reports"
    _full_report(out)
    report.write_report(made_results, out)
    # the full report is as it was: a narrowed render deleted 31 of its files and wrote its comment
    assert (out / "index.html").read_text() == FULL_PAGE
    assert json.loads((out / ".written").read_text())["full"] is True
    partial = out / "partial"
    full = input_sets()["every"]
    n = len(full)
    screen = _first_screen(partial / "index.html")
    assert screen.startswith(f"This report is partial: it measured 1 of the {n} inputs (not "), screen
    for left in [v for v in full if v != "llama-spm"][:5]:
        assert left in screen
    comment = (partial / "pr-comment.md").read_text()
    assert comment.split("\n\n")[1].startswith(f"**This report is partial: it measured 1 of the {n} inputs"), comment
    # nothing is recommended on checks it did not run
    assert "**Recommendation: none yet: a rule is not measured.**" in comment
    assert "✓" not in comment.split("**Recommendation", 1)[1].split("\n\n", 1)[0]
    assert json.loads((partial / ".written").read_text())["full"] is False


def test_asked_in_so_many_words_a_partial_render_replaces_the_full_one(made_results: Path, tmp_path: Path) -> None:
    out = tmp_path / "reports"
    _full_report(out)
    report.write_report(made_results, out, replace_full=True)
    assert _first_screen(out / "index.html").startswith("This report is partial:")
    assert not (out / "partial").exists()
    # a partial report over a partial one needs no asking: it replaces no full report
    (out / "index.html").write_text("edited by hand\n")
    report.write_report(made_results, out)
    assert not (out / "partial").exists()


def test_a_what_if_whose_server_made_no_result_does_not_hold_the_server_rule(
    made_results: Path, tmp_path: Path
) -> None:
    """A what-if's own file: a server that answered every request with HTTP 500 leaves no server
    result, and "it makes no vocab worse (… the server's cases)" was ✓ all the same."""
    res = tmp_path / "results"
    shutil.copytree(made_results, res)
    shutil.rmtree(res / "server")
    subject = {"file": "data/vocabs/ggml-vocab-llama-spm.gguf", "name": "llama-spm", "overrides": []}
    vt = verdict(PageData(res, tmp_path / "out", subject=subject))
    assert vt is not None
    worse = next(r for r in vt.recommendation["rules"] if r["rule"].startswith("it makes no vocab worse"))
    assert worse["holds"] is None and worse["why"] == "the server analysis has no result on llama-spm", worse
    assert vt.recommendation["call"] == "none yet: a rule is not measured"
