"""`make whatif` on a fixture copied under another name gives a report of its own."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from llgbridge import candidates, whatif
from llgbridge.errors import InputError
from llgbridge.paths import VOCABS


def test_whatif_refuses_an_unknown_parameter(tmp_path: Path) -> None:
    mine = tmp_path / "x.gguf"
    shutil.copy(VOCABS / "ggml-vocab-llama-spm.gguf", mine)
    with pytest.raises(InputError, match="parameter colour: no analysis notebook takes it"):
        whatif.whatif(mine, params={"colour": "red"}, out=tmp_path / "r")


def test_whatif_refuses_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="nope.gguf: no such file"):
        whatif.whatif(tmp_path / "nope.gguf", out=tmp_path / "r")


def test_a_link_to_a_fixture_takes_the_links_name_and_its_own_log_folder(tmp_path: Path) -> None:
    """`make whatif VOCAB=my-model.gguf` where the file is a link to a fixture took the fixture's
    name: its report went to reports/whatif/llama-spm and its servers' logs into the main run's log
    folder, opened with truncation. It is named by the link, and a what-if's logs stay beside its
    own results."""
    from llgbridge.analyses.server import compute as server

    link = tmp_path / "my-model.gguf"
    link.symlink_to(VOCABS / "ggml-vocab-llama-spm.gguf")
    assert whatif.safe_name(link) == "my-model"
    results = tmp_path / "reports" / "whatif" / "llama-spm" / "results"
    logs = server.log_dir_for(str(results))
    assert logs != server.LOG_DIR and logs.is_relative_to(tmp_path)
    assert server.log_dir_for("data/results") == server.LOG_DIR


def test_a_file_name_outside_ascii_is_made_usable() -> None:
    """`make whatif VOCAB=模型.gguf` said "NAME: '__' is not a usable input name" although no NAME was
    given and the README says a file's name is made usable."""
    from llgbridge.paths import name_problem

    name = whatif.safe_name(Path("模型.gguf"))
    assert name == "u6a21u578b" and name_problem(name) == ""
    assert whatif.safe_name(Path("ünï-2.gguf")) == "u00fcnu00ef-2"


@pytest.mark.slow
def test_whatif_with_an_override_says_what_it_changed(tmp_path: Path) -> None:
    """llama-spm without its space prefix: the analyses whose tables this reads (census, forced,
    engines, probe, matrix) run with the override and without it, and the page opens with what
    moved. The file without it is the guide's llama-spm under another name, a what-if of its own
    (its report beside): 4.3's 16410 differing tokens, 16395 of them lost a leading space, and
    5.1's forced literal broken by the shipped bridge alone."""
    mine = tmp_path / "spm.gguf"
    shutil.copy(VOCABS / "ggml-vocab-llama-spm.gguf", mine)
    out = tmp_path / "report"
    names = whatif.chosen("census forced engines probe matrix")
    st = whatif.whatif(
        mine,
        params={"literal": "hi there", "cases": ["forced_literal"]},
        out=out,
        models_dir=tmp_path / "models",
        overrides=["tokenizer.ggml.add_space_prefix=bool:false"],
        names=names,
    )
    assert [s["status"] for s in st] == ["ok"] * len(names), st
    name = "spm+add_space_prefix-false"
    assert {s["vocab"] for s in st} == {name}
    plain = pd.read_csv(out / "without" / "tables" / "census.csv")
    assert plain[["vocab", "differing", "lost_leading_space"]].values.tolist() == [["spm", 16410, 16395]]
    forced = pd.read_csv(out / "without" / "tables" / "forced.csv")
    assert set(forced.vocab) == {"spm"} and sorted(forced.bridge) == sorted(
        ["upstream", "fixed", "sentinel", *candidates.NAMES]
    )
    matrix = pd.read_csv(out / "without" / "tables" / "matrix.csv")
    assert sorted(zip(matrix.bridge, matrix.outcome)) == [
        ("fixed", "pass"),
        ("sentinel", "pass"),
        ("upstream", "violation"),
    ]
    assert (out / "without" / "index.html").exists() and (out / "without" / "html" / "census" / "spm.html").exists()
    # the other engines' audit runs on a what-if too (issue 46), each engine a row of its own; one
    # whose table is a bridge audited already (guidance's: the sentinel bridge) is not run again
    from llgbridge.analyses.engines.compute import ENGINES

    engines = pd.read_csv(out / "without" / "tables" / "engines.csv")
    audited = sorted(e.name for e in ENGINES if not e.same_as)
    assert sorted(engines.engine) == audited and set(engines.vocab) == {"spm"}
    moved = pd.read_csv(out / "tables" / "override_changes.csv", dtype=str, keep_default_na=False)
    census = moved[(moved.table == "census") & (moved.column == "differing")]
    # one row: nothing tells it apart from another, so it is named by nothing
    assert census[["row", "without"]].values.tolist() == [["", "16410"]] and int(census["with"].iloc[0]) < 16410
    assert ((moved.table == "probe") & (moved.column == "tokenize_exact")).any()
    page = (out / "index.html").read_text()
    assert "What the override changed" in page and "--override-kv tokenizer.ggml.add_space_prefix=bool:false" in page
    # its first screen: the user's file and override, then what the override changed, before the verdict
    first = page.split('<section class="verdict"', 1)[0]
    assert "<code>spm.gguf</code>" in first and 'id="override"' in first, first[-3000:]
    assert "--override-kv tokenizer.ggml.add_space_prefix=bool:false" in first.split('id="override"')[0]
    # a table one side wrote and the other did not is said apart, never counted among those compared
    said = re.search(r"(\d+) of the (\d+) tables both sides wrote moved|All (\d+) tables moved", first)
    sides = [{p.name for p in (d / "tables").glob("*.csv")} for d in (out, out / "without")]
    both = len((sides[0] & sides[1]) - {"override_changes.csv"})
    assert said is not None and int(said[2] or said[3]) == both, (said, both)
    # its own synthetic model, never the plain file's
    assert sorted(p.name for p in (tmp_path / "models").glob("*.gguf"))[0].startswith(f"synthetic-{name}+kv-")


def test_the_override_summary_lists_the_moved_tables_when_none_is_one_sided(tmp_path: Path) -> None:
    """Every table written on both sides: the moved ones are listed, row by row (the list once sat
    under the one-sided tables' sentence, so it vanished when there were none)."""
    from llgbridge.overrides import parse

    for side, name, differing in ((tmp_path / "tables", "spm+x", 0), (tmp_path / "without" / "tables", "spm", 16410)):
        side.mkdir(parents=True)
        (side / "census.csv").write_text(f"vocab,differing\n{name},{differing}\n")
    sec = whatif.override_section(
        tmp_path,
        tmp_path / "tables",
        "spm+x",
        "spm",
        tmp_path / "spm.gguf",
        (parse("tokenizer.ggml.add_space_prefix=bool:false"),),
    )
    assert "All 1 tables moved" in sec.text, sec.text
    # table by table, under the words (the page shows it collapsed: issue 60)
    assert "- `census` (1 of 1 rows): differing 16410 → 0" in sec.more, sec.more
    assert "one side only" not in sec.text + sec.more
