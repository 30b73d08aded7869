"""The report: verdict first, bytes visible, the same tables in HTML and Markdown, and one bad
result never costs the page.

Results are computed in the test from the real fixtures (two vocabs, through the real bridges)
and written as the notebooks write them (`nb.write_result` with each analysis's payload); a
failed one as `run.execute` writes it. The verdict's cells are checked against those results,
and its bug-B finding on bert-bge against the guide's 7.2 mechanism (the forced mask admits a
token that is not a prefix).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlparse

import html5lib
import pandas as pd
import pytest
from conftest import bridge, vocab

from llgbridge import guide, nb, probe, report
from llgbridge.analyses.census import compute as census
from llgbridge.analyses.forced import compute as forced_mod
from llgbridge.analyses.leak import compute as leak
from llgbridge.grammars import FORCED_LITERAL, LEAK_GRAMMAR
from llgbridge.paths import ROOT, write_json

VOCABS = ("llama-bpe", "bert-bge")  # written out of the guide's order on purpose


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("results")
    for name in VOCABS:
        v = vocab(name)
        nb.write_result(str(out), "census", name, census.run_census(v).to_json())
        cases = probe.tokenize_cases(v, list(probe.PROBES))
        nb.write_result(str(out), "probe", name, probe.payload(FORCED_LITERAL, probe.probe_row(v), cases))
        truth = bridge(name, "truth")
        leaks = [leak.leak_test(bridge(name, b), truth, LEAK_GRAMMAR) for b in ("upstream", "fixed")]
        nb.write_result(str(out), "leak", name, leak.leak_payload(v, LEAK_GRAMMAR, leaks, {}))
        forced = [forced_mod.forced_test(bridge(name, b), FORCED_LITERAL) for b in ("upstream", "fixed")]
        nb.write_result(str(out), "forced", name, forced_mod.forced_payload(FORCED_LITERAL, forced, {}, name))
    write_json(
        out / "probe" / "broken.json",
        {
            "status": "failed",
            "notebook": "probe",
            "vocab": "broken",
            "error": "InputError: data/vocabs/ggml-vocab-broken.gguf: no such file",
        },
    )
    return out


@pytest.fixture(scope="module")
def built(results: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report")
    report.write_report(results, out)
    return out


def _files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_the_report_is_byte_stable(results: Path, built: Path, tmp_path: Path) -> None:
    report.write_report(results, tmp_path)
    assert _files(built) == _files(tmp_path)
    assert {
        "index.html",
        "pr-review-tables.md",
        "run.json",
        "tables/census.csv",
        "tables/probe.csv",
        "tables/inputs.csv",
        "vocab/llama-bpe.html",
        "vocab/bert-bge.html",
    } <= set(_files(built))


def test_census_sits_beside_the_guides_figures(built: Path) -> None:
    df = pd.read_csv(built / "tables" / "census.csv")
    assert list(df.vocab) == ["bert-bge", "llama-bpe"]  # tables sort by vocab
    for name in VOCABS:
        differing, lost, n = guide.CENSUS[name]
        row = df[df.vocab == name].iloc[0]
        assert (row.differing, row.lost_leading_space, row.n_tokens) == (differing, lost, n)
    md = (built / "pr-review-tables.md").read_text()
    # the guide's vocabs come first, in the guide's order (llama-bpe before bert-bge)
    t43 = md.split("Guide table 4.3", 1)[1]
    assert t43.index("| llama-bpe |") < t43.index("| bert-bge |")
    assert "| 117/128256 |" in t43 and "| 5/30522 |" in t43 and "| ✗ |" not in md


def test_the_verdict_answers_from_the_results(results: Path) -> None:
    vt = report.verdict(results)
    assert vt is not None
    assert list(vt.df["input"]) == ["llama-bpe", "bert-bge"]  # one row per input, the guide's order
    text = " ".join(vt.sentences)
    assert "so masks admit whitespace the grammar forbids) hits **2 of 2 vocabs**: llama-bpe, bert-bge." in text
    # guide 7.2's mechanism on a WPM vocab: upstream's forced mask admits a token that is no prefix
    assert (
        "generation runs unconstrained) hits **1 of 2 vocabs**: bert-bge. Not llama.cpp's SentencePiece type (SPM): "
        "bert-bge (WPM, beyond the guide)." in text
    )
    assert "**The fix repairs all 2** affected vocabs" in text
    assert "on **1 of 2 vocabs**: bert-bge" in text  # the probe fails on bert-bge, so the fix tokenizes greedily
    bge = vt.values.set_index("input").loc["bert-bge"]
    # guide 4.3 and 4.4: 5 wrong tokens, 2 illegal ones admitted without the fix, 0 with it
    assert (
        bge["bug A: tokens with wrong bytes"],
        bge["bug A: illegal tokens admitted"],
        bge["with the fix: illegal admitted"],
    ) == (5, 2, 0)
    assert bge["bug B: llama_tokenize exact"] == "no" and bge["with the fix: tokenizer"] == "greedy"
    # each cell carries its colour: the leak shows upstream, the fix repairs it, greedy is its cost
    cells = vt.df.set_index("input").loc["bert-bge"]
    assert (
        cells["bug A: illegal tokens admitted"].cls,
        cells["with the fix: illegal admitted"].cls,
        cells["with the fix: tokenizer"].cls,
    ) == ("bad", "repaired", "cost")
    # no native or server results here: what was not run says so, and no call is made on a rule not measured
    assert (
        bge["the PR's test: exit without → with"] == "not run"
        and bge["end to end: cases passed without → with"] == "not run"
    )
    assert vt.recommendation["call"].startswith("none yet")
    # every guide figure this small run recomputes is reproduced
    matched, compared = vt.reproduced
    assert compared >= 8 and matched == compared


def test_failed_inputs_are_named_everywhere(results: Path, built: Path, tmp_path: Path) -> None:
    assert (
        "**Failed inputs:** probe/broken: InputError: data/vocabs/ggml-vocab-broken.gguf: no such file"
        in (built / "pr-review-tables.md").read_text()
    )
    assert "<h2>Failed inputs</h2>" in (built / "index.html").read_text()
    inputs = pd.read_csv(built / "tables" / "inputs.csv", keep_default_na=False)
    assert inputs[inputs.status == "failed"][["analysis", "input"]].values.tolist() == [["probe", "broken"]]
    assert report.main(["--results", str(results), "--out", str(tmp_path / "again")]) == 1


def test_a_result_that_does_not_load_is_a_failed_input_and_the_page_is_still_written(
    results: Path, tmp_path: Path
) -> None:
    import shutil

    bad = tmp_path / "results"
    shutil.copytree(results, bad)
    forced = bad / "forced" / "llama-bpe.json"
    forced.write_text(forced.read_text().replace('"rows"', '"rowz"'))
    (bad / "leak" / "bert-bge.json").write_text("{not json")
    failed = report.write_report(bad, tmp_path / "out")
    errors = {(f["notebook"], f["vocab"]): f["error"] for f in failed}
    assert errors[("forced", "llama-bpe")] == "unusable result: missing 'rows'"
    assert errors[("leak", "bert-bge")].startswith("unreadable result: JSONDecodeError")
    page = (tmp_path / "out" / "index.html").read_text()
    assert "Forced-mask test" in page and "Leak test" in page  # the other inputs still make both sections


def _pages(out: Path) -> list[Path]:
    return sorted(p for p in out.rglob("*.html"))


def test_pages_parse_links_resolve_and_hold_no_absolute_path(built: Path) -> None:
    for page in _pages(built):
        text = page.read_text()
        doc = html5lib.parse(text, namespaceHTMLElements=False)
        assert doc.find(".//title") is not None and doc.find(".//title").text
        ids = {e.get("id") for e in doc.iter() if e.get("id")}
        for a in doc.iter("a"):
            href = a.get("href")
            url = urlparse(href)
            if url.scheme or not href:
                continue
            if not url.path:
                assert url.fragment in ids, f"{page.name}: #{url.fragment}"
                continue
            assert (page.parent / url.path).resolve().exists(), f"{page.relative_to(built)} links {href}"
        assert str(ROOT) not in text and str(built) not in text
    for md in built.glob("*.md"):
        assert str(ROOT) not in md.read_text()


def test_the_verdict_table_has_one_row_per_input(built: Path) -> None:
    doc = html5lib.parse((built / "index.html").read_text(), namespaceHTMLElements=False)
    verdict = doc.find(".//section[@id='verdict']")
    rows = verdict.findall(".//tbody/tr")
    assert [r.find("td/a").text for r in rows] == ["llama-bpe", "bert-bge"]
    assert [r.find("td/a").get("href") for r in rows] == ["vocab/llama-bpe.html", "vocab/bert-bge.html"]


def test_a_leading_space_is_visible_on_the_page_and_in_markdown() -> None:
    df = pd.DataFrame({"vocab": ["llama-spm"], "got": [" The"], "pieces": ['[" hello", "1\\n2", "\\\\xfe"]']})
    page = report.html_table(df)
    assert "&#x27; The&#x27;" in page or "' The'" in page
    assert "'1\\\\n2'" in report.md_table(df) or "'1\\n2'" in report.md_table(df)
    cell = re.search(r"<td class='b'>([^<]*)</td>", page)
    assert cell is not None and cell.group(1).replace("&#x27;", "'") == "' The'"
    assert "'\\xfe'" in report.md_table(df)


def test_written_files_follow_the_umask(built: Path) -> None:
    mask = os.umask(0)
    os.umask(mask)
    assert (built / "index.html").stat().st_mode & 0o777 == 0o666 & ~mask


@pytest.mark.parametrize(
    "witness, kind",
    [("b'<|eot_id|>'", "special"), ("b'\\xfe'", "invalid UTF-8"), ("b'\\xc3\\xa9 x'", "text")],
)
def test_witness_kinds(witness: str, kind: str) -> None:
    assert report.witness_kind(witness) == kind


def test_every_local_link_of_the_committed_report_resolves_in_a_clean_checkout() -> None:
    """What a reader of the repository gets: each link of a committed page names a committed file
    (or a folder holding some); reports/html/ is generated and git-ignored, so nothing links there."""
    import subprocess

    tracked = set(
        subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    )
    folders = {str(Path(f).parent) for f in tracked}
    while any(str(Path(d).parent) not in folders for d in list(folders)):
        folders |= {str(Path(d).parent) for d in folders}
    pages = sorted(f for f in tracked if f.startswith("reports/") and f.endswith(".html"))
    assert pages
    dead = []
    for rel in pages:
        doc = html5lib.parse((ROOT / rel).read_text(), namespaceHTMLElements=False)
        for a in [*doc.iter("a"), *doc.iter("img"), *doc.iter("link")]:
            href = a.get("href") or a.get("src")
            url = urlparse(href or "")
            if url.scheme or not url.path:
                continue
            target = os.path.normpath(str(Path(rel).parent / url.path))
            if target not in tracked and target not in folders:
                dead.append(f"{rel} -> {href}")
    assert dead == []


def test_a_vocab_page_opens_with_its_story(built: Path) -> None:
    """Guide 4.3's example for llama-bpe, token 5354, as the page tells it: the piece `' ..'`
    handed to llguidance as `'..'`; then its tables, collapsed."""
    page = (built / "vocab" / "llama-bpe.html").read_text()
    story = page.split('<div class="story">', 1)[1].split("</div>", 1)[0]
    assert "Bug A here:" in story and "token 5354, piece <code>' ..'</code>, handed over as <code>'..'</code>" in story
    assert page.index('<div class="story">') < page.index("<details>")


def test_the_census_figure_shows_bpes_few_tokens_with_their_counts(built: Path) -> None:
    """Guide 4.3's counts (117 of 128256 on llama-bpe, 5 of 30522 on bert-bge) are printed at their
    bars, which a log axis of the share keeps visible beside SentencePiece's half of the vocab."""
    page = (built / "index.html").read_text()
    figure = page.split('<section id="census">', 1)[1].split("</figure>", 1)[0]
    assert "117 of 128256 (0.091%)" in figure and "5 of 30522 (0.016%)" in figure
    assert "0.01%" in figure and "100%" in figure  # the log axis's ticks


def test_a_sentinel_example_is_given_in_real_bytes() -> None:
    """Guide 5.2, hand-checked on llama-spm: token 0 has no real bytes (`llama_token_to_piece`,
    special=false, gives none) while its text with special=true is `<unk>`, which the sentinel's
    table holds for it; a worst step is stored as `soundness.describe` writes it."""
    from llgbridge.report.review import sentinel_examples

    v = vocab("llama-spm")
    assert v.token_to_piece(0) == b"" and v.token_to_piece(0, 0, True) == b"<unk>"
    worst = {
        "bridge": "sentinel",
        "vocab": "llama-spm",
        "grammar": "json_nested",
        "sample": '{"user": {"name": "Ada"}}',
        "step": 7,
        "prefix": '{"user": {"name": "',
        "next": "Ad",
        "n_under": 1,
        "under": '["<0:<unk>>"]',
    }
    (ex,) = sentinel_examples([{"vocab": "llama-spm", "worst": [worst, {**worst, "bridge": "upstream"}]}])
    assert (ex["vocab"], ex["token"], ex["text"], ex["prefix"], ex["step"]) == (
        "llama-spm",
        "0",
        "<unk>",
        '{"user": {"name": "',
        7,
    )
    assert ex["real bytes"].startswith("none")
    md = report.md_table(pd.DataFrame([ex]))
    assert "'<unk>'" in md and '\'{"user": {"name": "\'' in md  # byte columns quoted once, as every table quotes them


def test_one_palette_and_one_word_for_each_thing() -> None:
    """Issue 23, 8 and 10: the bridges' colours are written once (`llgbridge.palette`), and the page
    calls llama.cpp's sampler before the PR `upstream`, keeping "as shipped" for the test."""
    hexes = re.compile(r"""["']#[0-9a-fA-F]{6}["']""")
    sources = [p for p in (ROOT / "lib" / "llgbridge").rglob("*.py") if p.name != "palette.py"]
    sources += sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert [str(p.relative_to(ROOT)) for p in sources if hexes.search(p.read_text())] == []
    page_code = [
        *(ROOT / "lib" / "llgbridge" / "report").glob("*.py"),
        *(ROOT / "lib" / "llgbridge" / "templates").glob("*"),
    ]
    assert [
        p.name for p in page_code if re.search(r"shipped (sampler|bridge)|the shipped `common", p.read_text())
    ] == []


def test_no_report_module_is_analysis_code() -> None:
    """Editing a section, its table code or the palette reruns no analysis."""
    from llgbridge import results

    listed = {*results.SHARED_CODE, *(m for mods in results.MODULES.values() for m in mods)}
    assert not [m for m in listed if m.startswith("report") or m == "palette.py"]


# the compiled PR test's rows as native.csv holds them (llguidance 1.0.1), hand-checked against the
# binaries' logs: command-r hits the item limit on both samplers, bert-bge has no end token
_LIMIT = "parser error: Too many items (limit 50000; mask); try avoiding single-byte/short lexemes"
_ROWS = {
    "command-r": (
        {
            "pr_test_exit": 134,
            "no_space_bad": 0,
            "forced_bad": 0,
            "tok_eos": 255001,
            "pr_test_llg_error": _LIMIT,
            "shipped_test_llg_error": _LIMIT,
        },
        {
            "pr_test_exit": 134,
            "no_space_bad": 0,
            "forced_bad": 0,
            "tok_eos": 255001,
            "pr_test_llg_error": _LIMIT,
            "shipped_test_llg_error": _LIMIT,
        },
    ),
    "bert-bge": (
        {"pr_test_exit": 134, "no_space_bad": 2, "forced_bad": 1, "tok_eos": -1, "pr_test_llg_error": ""},
        {
            "pr_test_exit": 134,
            "no_space_bad": 0,
            "forced_bad": 0,
            "tok_eos": -1,
            "pr_test_llg_error": "NoExtensionBias",
            "pr_test_failure": "test-grammar-llguidance.cpp:1236: Assertion `cur[tok_arr.selected].id == "
            "tok_eos' failed.",
        },
    ),
    "llama-spm": (
        {"pr_test_exit": 134, "no_space_bad": 6136, "forced_bad": 1, "tok_eos": 2},
        {"pr_test_exit": 0, "no_space_bad": 0, "forced_bad": 0, "tok_eos": 2},
    ),
}


@pytest.mark.parametrize(
    "name, text, cls",
    [
        ("command-r", "134 → 134: bug D: item limit", "same"),
        ("bert-bge", "134 (2 with a space, 1 not a prefix) → 134: no end token", "same"),
        ("llama-spm", "134 (6136 with a space, 1 not a prefix) → 0", "repaired"),
    ],
)
def test_an_abort_after_the_fix_with_no_wrong_token_is_not_coloured_as_the_bug(name: str, text: str, cls: str) -> None:
    """Issue 31: the PR test's cell says what its colour says. With the fix, command-r and
    bert-bge still exit 134 with 0 wrong tokens (bug D; a vocab without an end token): not "bug
    shows", and the cause is in the cell; the two counts llama-spm's 6137 added are shown apart."""
    from llgbridge.report.verdict import pr_test_cell

    cell = pr_test_cell(*_ROWS[name])
    assert (cell.value, cell.cls) == (text, cls)


def _committed_text(name: str) -> str:
    import html as H

    # a link or a code span inside a sentence is part of it: its tags go without a space
    text = re.sub(r"</?(a|code|b|i|strong|em)\b[^>]*>", "", (ROOT / "reports" / name).read_text(encoding="utf-8"))
    return H.unescape(re.sub(r"<[^>]+>", " ", text))


def test_the_first_screen_names_where_the_suite_finds_the_guide_wrong() -> None:
    """Issues 31 and 44: where a measured figure contradicts the guide (4.5, its words quoted) and the
    notes on it (5.3) stand beside the count of figures reproduced, above the verdict's findings,
    not 30,000 px down."""
    page = (ROOT / "reports" / "index.html").read_text(encoding="utf-8")
    head = page[: page.index("<h2>Verdict</h2>")]
    assert "of the guide's figures that this suite recomputes were reproduced exactly" in head
    assert "Guide 4.5 says" in head and "A note on guide 5.3" in head and "Recommendation:" in head


def test_the_committed_pages_show_bytes_not_python_reprs() -> None:
    """Issue 31: a witness `b'\\xfe'` is shown as the bytes it is, `'\\xfe'`."""
    for name in ("index.html", "pr-review-tables.md", "pr-comment.md"):
        assert not re.search(r"""(?<![\w'])b'(?:\\x|<|The)""", _committed_text(name)), name


def test_the_verdict_says_the_prs_ctest_entries_pass_and_what_was_not_run() -> None:
    text = _committed_text("index.html")
    assert "The PR's two ctest entries pass with the fix" in text
    assert "not run" in text.split("end to end: cases passed", 1)[1].split("Words this report uses", 1)[0]
