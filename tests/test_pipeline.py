"""The pipeline around the analyses: what Make reruns, how a run fails, what an executed page holds."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from llgbridge import results, run
from llgbridge.paths import RESULTS, ROOT

PIPELINE = ("report.py", "run.py", "batch.py", "whatif.py", "bench.py", "gguf_fuzz.py", "templates/")


def _prerequisites(target: str) -> list[str]:
    """The prerequisites Make records for `target` (its database, printed without running anything)."""
    out = subprocess.run(["make", "-pnq", target], cwd=ROOT, capture_output=True, text=True).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith(f"{target}:"))
    return line.split(":", 1)[1].split("|")[0].split()


@pytest.mark.parametrize("analysis", ["census", "leak", "forced", "probe", "exactness", "soundness", "native"])
def test_editing_the_pipeline_or_the_report_reruns_no_analysis(analysis: str) -> None:
    deps = _prerequisites(f"data/results/{analysis}/llama-bpe.json")
    assert f"notebooks/{analysis}.ipynb" in deps
    assert not [d for d in deps if any(p in d for p in PIPELINE)]


def test_the_pool_depends_on_every_analysis_code_and_input_and_not_on_the_pipeline() -> None:
    deps = _prerequisites("data/results/.batch/pool")
    for analysis in ("census", "leak", "forced", "probe", "exactness", "soundness", "native", "matrix", "corpus"):
        assert f"notebooks/{analysis}.ipynb" in deps
    assert "lib/llgbridge/masks.py" in deps and "data/vocabs/ggml-vocab-llama-bpe.gguf" in deps
    assert "data/models/synthetic-gemma-4.gguf" in deps and "data/schemas/.complete" in deps
    assert not [d for d in deps if any(p in d for p in PIPELINE)]


def test_editing_one_analysis_reruns_only_its_notebooks() -> None:
    assert "lib/llgbridge/masks.py" in _prerequisites("data/results/leak/llama-bpe.json")
    for other in ("census", "probe", "exactness", "soundness", "native"):
        assert "lib/llgbridge/masks.py" not in _prerequisites(f"data/results/{other}/llama-bpe.json")


def test_reading_the_makefile_changes_nothing(tmp_path: Path) -> None:
    """`make -n` prints; it must not delete a failed result (the retry is the result's date)."""
    failed = RESULTS / "census" / "zz-test-failed.json"
    failed.parent.mkdir(parents=True, exist_ok=True)
    failed.write_text(json.dumps({"status": "failed", "notebook": "census", "vocab": "zz-test-failed", "error": "x"}))
    try:
        subprocess.run(["make", "-n", "help"], cwd=ROOT, capture_output=True, check=True)
        assert failed.exists()
    finally:
        failed.unlink(missing_ok=True)


def test_a_failed_run_is_one_line_and_retried(tmp_path: Path) -> None:
    st = run.execute("census", "no-such-vocab", out_root=tmp_path / "reports", results_dir=tmp_path / "results")
    assert st["status"] == "failed" and "\n" not in str(st["error"]) and "no-such-vocab" in str(st["error"])
    result = tmp_path / "results" / "census" / "no-such-vocab.json"
    assert result.stat().st_mtime == 0  # older than every dependency: the next make runs it again
    page = (tmp_path / "reports" / "html" / "census" / "no-such-vocab.html").read_text()
    assert "<title>census · no-such-vocab</title>" in page and "../../index.html" in page
    executed = (tmp_path / "reports" / "notebooks" / "census" / "no-such-vocab.ipynb").read_text()
    assert str(ROOT) not in executed  # tracebacks and papermill's metadata name files absolutely
    assert "`vocab` | `\\\"no-such-vocab\\\"` | given" in executed  # the parameters that ran, shown


def test_every_result_on_disk_loads_through_its_schema() -> None:
    """Whatever `make report` left in data/results is usable by the report (none: nothing to check)."""
    for analysis in results.SCHEMAS:
        ok, failed = results.load(RESULTS, analysis)
        unusable = [f for f in failed if str(f["error"]).startswith(("unusable", "unreadable"))]
        assert not unusable, unusable
