"""The pipeline around the analyses: what Make reruns, how a run fails, what an executed page holds."""

from __future__ import annotations

import contextlib
import html
import json
import re
import subprocess
from pathlib import Path

import pytest

from llgbridge import analyses, results, run
from llgbridge.paths import RESULTS, ROOT

PIPELINE = (
    "report/",
    "run.py",
    "batch.py",
    "whatif.py",
    "audit.py",
    "answer.py",
    "measure/",
    "gguf_fuzz.py",
    "templates/",
)


def _prerequisites(target: str) -> list[str]:
    """The prerequisites Make records for `target` (its database, printed without running anything)."""
    out = subprocess.run(["make", "-pnq", target], cwd=ROOT, capture_output=True, text=True).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith(f"{target}:"))
    return line.split(":", 1)[1].split("|")[0].split()


ANALYSES = analyses.names()
LIB = ROOT / "lib" / "llgbridge"


def _import_closure(analysis: str) -> set[Path]:
    nb = json.loads(analyses.BY_NAME[analysis].notebook_path.read_text())
    code = "\n".join(
        line
        for c in nb["cells"]
        if c["cell_type"] == "code"
        for line in "".join(c["source"]).splitlines()
        if not line.lstrip().startswith(("%", "!"))
    )
    return results.import_closure([LIB / "__init__.py"], code)


def test_every_notebook_is_an_analysis_of_the_registry_and_every_analysis_has_one() -> None:
    on_disk = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert on_disk == sorted(ANALYSES)


def test_every_analysis_has_a_section_on_the_page_and_every_section_a_module() -> None:
    """The report finds each analysis's `NAME_section` in its entry's module (`section.py` in its
    package) by its name: a missing module or function would cost the page a section, so it is
    caught here; the page lists each analysis once, between the report's own sections."""
    import importlib

    page = importlib.import_module("llgbridge.report.pages").PAGE
    keys = [k for k, _ in page]
    assert len(set(keys)) == len(keys)
    assert set(ANALYSES) <= set(keys), set(ANALYSES) - set(keys)
    missing = [k for k, module in page if not callable(getattr(importlib.import_module(module), f"{k}_section", None))]
    assert not missing


def test_every_input_set_an_analysis_runs_on_has_its_inputs() -> None:
    """An analysis whose set had no inputs would run on nothing, without a word; and the Makefile
    names none (it read them by running Python while it was parsed)."""
    from llgbridge import inputsets

    sets = inputsets.input_sets()
    assert {a.runs_on for a in analyses.ANALYSES} <= set(sets) == set(analyses.INPUT_SETS)
    assert all(sets[s] for s in sets), sets
    assert "llama-spm" in sets["every"] and "smollm2-135m" in sets["every"] and "gemma-4" in sets["matrix"]
    makefile = (ROOT / "Makefile").read_text()
    assert "$(shell PYTHONPATH" not in makefile and "--inputs" not in makefile
    assert not [n for n in inputsets.GROUPS if re.search(rf"^{n}\s*[:?]?=", makefile, re.M)]


def test_a_result_of_an_analysis_outside_the_registry_is_refused() -> None:
    """A result filed under a name with no entry has no schema to check it by: it was used unchecked."""
    r = {"vocab": "llama-spm", "notebook": "emptypieces", "status": "ok"}
    assert "no analysis of the registry" in results.why_unusable("emptypieces", "llama-spm", r)


@pytest.mark.parametrize("analysis", ANALYSES)
def test_a_results_code_version_covers_every_module_its_notebook_reaches(analysis: str) -> None:
    """Every llgbridge module the notebook imports, directly or through others (lazily too), is
    hashed into the result's code version: editing any of them makes the result stale."""
    missing = _import_closure(analysis) - set(results.code_files(analysis)) - {LIB / m for m in results.DISPLAY_ONLY}
    assert not missing, sorted(str(f.relative_to(LIB)) for f in missing)


@pytest.mark.parametrize("analysis", ANALYSES)
def test_editing_the_pipeline_or_the_report_reruns_no_analysis(analysis: str) -> None:
    files = [str(f.relative_to(ROOT)) for f in results.code_files(analysis)]
    assert f"notebooks/{analysis}.ipynb" in files
    # a whole name: engines_e2e/guidance_run.py is the analysis's own, not the runner run.py
    whole = [f for f in files for p in PIPELINE if (f"/{p}" in f if p.endswith("/") else f.endswith(f"llgbridge/{p}"))]
    assert not whole


def test_the_makefile_keeps_no_second_list_of_what_a_result_depends_on() -> None:
    """One graph: the pool decides what reruns from each result's bytes; Make only orders the pool
    after what it builds, so it names no analysis module and has no per-result rule."""
    makefile = (ROOT / "Makefile").read_text()
    # a compiled module's C source is Make's to build, so the Makefile names that one
    named = sorted({m for mods in (*results.MODULES.values(), results.SHARED_CODE) for m in mods if m.endswith(".py")})
    assert not [m for m in named if re.search(rf"\b{re.escape(m)}\b", makefile)], named
    assert (
        "data/results/%.json" not in makefile
        and "$(eval" not in makefile.split("$(POOL_STAMP):")[0].split("ANALYSES ?=")[1]
    )
    deps = _prerequisites("data/results/.batch/pool")
    assert "FORCE" in deps and "data/models/.synthetic" in deps and "data/schemas/.complete" in deps
    assert "data/native/.built" in deps and "data/native/server/.built" in deps and "data/models/.fetched" in deps


def test_reading_the_makefile_changes_nothing(tmp_path: Path) -> None:
    """`make -n` prints; it must not delete a failed result (the retry is the result's date)."""
    failed = RESULTS / "census" / "zz-test-failed.json"
    made = [d for d in (failed.parent, *failed.parent.parents) if not d.exists()]  # left as found
    failed.parent.mkdir(parents=True, exist_ok=True)
    failed.write_text(json.dumps({"status": "failed", "notebook": "census", "vocab": "zz-test-failed", "error": "x"}))
    try:
        subprocess.run(["make", "-n", "help"], cwd=ROOT, capture_output=True, check=True)
        assert failed.exists()
    finally:
        failed.unlink(missing_ok=True)
        for d in made:  # the deepest first; one another test has written into meanwhile stays
            with contextlib.suppress(OSError):
                d.rmdir()


def test_a_failed_run_is_one_line_and_retried(tmp_path: Path) -> None:
    st = run.execute("census", "no-such-vocab", out_root=tmp_path / "reports", results_dir=tmp_path / "results")
    assert st["status"] == "failed" and "\n" not in str(st["error"]) and "no-such-vocab" in str(st["error"])
    result = tmp_path / "results" / "census" / "no-such-vocab.json"
    assert result.stat().st_mtime == 0  # older than every dependency: the next make runs it again
    page = (tmp_path / "reports" / "html" / "census" / "no-such-vocab.html").read_text()
    assert "<title>census · no-such-vocab</title>" in page and "../../index.html" in page
    executed = (tmp_path / "reports" / "notebooks" / "census" / "no-such-vocab.ipynb").read_text()
    assert str(ROOT) not in executed  # tracebacks and papermill's metadata name files absolutely
    # the parameters that ran, shown (an HTML table: escaped, so a value never becomes markup)
    header = json.loads(executed)["cells"][0]["source"]
    header = header if isinstance(header, str) else "".join(header)
    shown = html.escape(json.dumps({"name": "no-such-vocab", "file": "", "models": [], "overrides": []}))
    assert f"<tr><td><code>input</code></td><td><code>{shown}</code></td><td>given</td></tr>" in header


def test_a_result_a_notebook_writes_loads_through_its_schema(tmp_path: Path) -> None:
    """What a notebook writes, the report can read: one real run's result, loaded back through
    `results.load` (the report's only reader), is usable and current."""
    st = run.execute("census", "bert-bge", out_root=tmp_path / "reports", results_dir=tmp_path / "results")
    assert st["status"] == "ok", st
    ok, failed = results.load(tmp_path / "results", "census")
    assert (failed, [r["vocab"] for r in ok]) == ([], ["bert-bge"])


def test_make_never_deletes_a_fixture_it_fetched(tmp_path: Path) -> None:
    """On a fresh clone the fixtures a synthetic model is made from did not exist when Make started,
    and reached them through two pattern rules: Make took them for intermediate files and deleted six
    of them once `make report` ended (`rm data/vocabs/ggml-vocab-phi-3.gguf ...`), so the next run
    had no llama-spm. `make -n` in a tree whose fixtures are not fetched yet prints what it would do."""
    for name in ("Makefile", "pyproject.toml"):
        (tmp_path / name).write_bytes((ROOT / name).read_bytes())
    (tmp_path / "lib").symlink_to(ROOT / "lib")
    (tmp_path / "data" / "vocabs").mkdir(parents=True)
    out = subprocess.run(["make", "-n", "data/models/.synthetic"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "llgbridge.inputsets --make-models" in out.stdout  # the run is planned ...
    assert not [ln for ln in out.stdout.splitlines() if ln.startswith("rm data/")], out.stdout  # ... keeping its input


# a notebook's parameters cell must spell its defaults as literals (papermill replaces the cell);
# the guide's grammar and literal are spelled once, in grammars.py, and the notebooks hold to it
SPELLED_ONCE = {"grammar": "LEAK_GRAMMAR", "leak_grammar": "LEAK_GRAMMAR", "literal": "FORCED_LITERAL"}


@pytest.mark.parametrize("analysis", ANALYSES)
def test_a_notebooks_default_grammar_and_literal_are_the_ones_grammars_spells(analysis: str) -> None:
    from llgbridge import grammars, params

    declared = params.declared(analysis)
    wrong = {
        name: declared[name]
        for name, const in SPELLED_ONCE.items()
        if name in declared and declared[name] != getattr(grammars, const)
    }
    assert wrong == {}
