"""Issue 13, the hostile pass: one test (or more) per numbered break, each reproducing it.

Crafted GGUFs are written here with `gguf.GGUFWriter` (llama-spm's real tokenizer, one key
changed); no crafted binary is committed. Kernels are started only where the break lives in one
(a notebook run, a native abort, Make).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from gguf import Keys
from helpers import CENSUS_ONLY, PROGRAMS, SPM, abort_notebook, census_needs_no_models, write_vocab

from llgbridge import candidates, fixtures, params, paths, report, results, run, synth, whatif
from llgbridge.errors import InputError, cause_line
from llgbridge.inputs import Input
from llgbridge.measure import regen
from llgbridge.paths import RESULTS, ROOT, VOCABS, vocab_path
from llgbridge.vocab import Vocab


def _big_piece(k: str, v: Any) -> Any:
    return v[:300] + [b"a" * 16384] + v[301:] if k == Keys.Tokenizer.LIST else v


def _eos_out_of_range(k: str, v: Any) -> Any:
    return 99999 if k == Keys.Tokenizer.EOS_ID else v


def _one_line_refusal(path: Path) -> str:
    with pytest.raises(InputError) as e:
        Vocab(path)
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg, msg
    return msg


# -- 1. one input can stop the whole report ---------------------------------------------------------
@pytest.mark.slow
def test_1_a_16kb_piece_costs_neither_the_report_nor_a_line(tmp_path: Path, spm_results: Path) -> None:
    big = write_vocab(tmp_path / "big.gguf", _big_piece)
    res = tmp_path / "results"
    st = run.execute("forced", Input.make("big", str(big)), {}, out_root=tmp_path / "r", results_dir=res)
    assert st["status"] == "ok", st
    rows = json.loads((res / "forced" / "big.json").read_text())["rows"]
    # no bridge can hold the piece: each says why in one line (sentinel's llguidance panic included)
    assert [r["bridge"] for r in rows] == ["upstream", "fixed", "sentinel", *candidates.NAMES]
    assert all("build_error" in r for r in rows)
    assert all("\n" not in r["build_error"] for r in rows), rows
    shutil.copytree(spm_results / "forced", res / "forced", dirs_exist_ok=True)
    failed = report.write_report(res, tmp_path / "out")
    assert (tmp_path / "out" / "index.html").exists() and (tmp_path / "out" / "tables" / "forced.csv").exists()
    assert not [f for f in failed if f["vocab"] in ("big", "(all)")], failed


# -- 2. a file name can stop Make -----------------------------------------------------------------
@pytest.mark.parametrize("name", ["-dash", "a:b", "a#b", "a b", "a$b", "..", "a%b", os.fsdecode(b"a\xffb")])
def test_2_an_unusable_file_name_is_refused_in_one_line(tmp_path: Path, name: str) -> None:
    with open(os.fsencode(tmp_path / f"ggml-vocab-{name}.gguf"), "wb") as f:  # bytes: a \xff name is not text
        f.write(SPM.read_bytes()[:64])
    (tmp_path / "ggml-vocab-fine.gguf").write_bytes(b"")
    assert "fine" in fixtures.vocab_names(extra=tmp_path)
    assert name not in fixtures.vocab_names(extra=tmp_path)
    [r] = fixtures.refused(tmp_path)
    assert "\n" not in r["error"] and r["error"].startswith("refused file name:") and r["vocab"].isascii()


def test_2_the_makefile_parses_with_every_name_refused() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "llgbridge.fixtures", "--names"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "lib")},
    )
    names = out.stdout.split()
    assert all(not paths.name_problem(n) for n in names), names


# -- 3. failures are lost silently ----------------------------------------------------------------
# test_pipeline.test_reading_the_makefile_changes_nothing: `make -n help` leaves a failed result


# -- 4. stale or foreign results reach the report -------------------------------------------------
@pytest.fixture(scope="module")
def spm_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """llama-spm's census and forced results, computed here as their notebooks compute them (a
    fresh clone has no data/results to borrow from)."""
    from conftest import bridge, vocab

    from llgbridge import nb
    from llgbridge.analyses.census import compute as census
    from llgbridge.analyses.forced import compute as forced_mod
    from llgbridge.analyses.leak import compute as leak
    from llgbridge.grammars import FORCED_LITERAL, LEAK_GRAMMAR

    out = tmp_path_factory.mktemp("spm-results")
    v = vocab("llama-spm")
    nb.write_result(str(out), "census", "llama-spm", census.run_census(v).to_json())
    forced = [forced_mod.forced_test(bridge("llama-spm", b), FORCED_LITERAL) for b in ("upstream", "fixed", "sentinel")]
    nb.write_result(str(out), "forced", "llama-spm", forced_mod.forced_payload(FORCED_LITERAL, forced, {}, "llama-spm"))
    leaks = [
        leak.leak_test(bridge("llama-spm", b), bridge("llama-spm", "truth"), LEAK_GRAMMAR)
        for b in ("upstream", "fixed")
    ]
    nb.write_result(str(out), "leak", "llama-spm", leak.leak_payload(v, LEAK_GRAMMAR, leaks, {}))
    return out


def _result(
    res: Path, analysis: str, it: Input, prov_params: dict[str, Any], inputs: list[Path], template: Path
) -> Path:
    src = json.loads((template / analysis / "llama-spm.json").read_text())
    stem = it.name
    full = params.check(analysis, {"input": it.param(), **prov_params})
    src.update(
        vocab=stem,
        provenance={
            **results.provenance(analysis, full),
            "inputs": [{"path": str(p), "sha256": results.file_sha256(p)} for p in inputs],
        },
    )
    for row in src.get("rows", []):
        row["vocab"] = stem
    src["digest"] = results.digest(src)  # as a run writes it: what follows edits it by hand
    out = res / analysis / f"{stem}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(src))
    return out


@pytest.fixture
def spm_copy(tmp_path: Path) -> Path:
    return Path(shutil.copy(SPM, tmp_path / "mine.gguf"))


def test_4_a_result_whose_input_changed_is_stale(tmp_path: Path, spm_copy: Path, spm_results: Path) -> None:
    _result(tmp_path / "res", "forced", Input.make("mine", str(spm_copy)), {}, [spm_copy], spm_results)
    assert len(results.load(tmp_path / "res", "forced")[0]) == 1
    spm_copy.write_bytes(spm_copy.read_bytes() + b"\0")
    ok, [f] = results.load(tmp_path / "res", "forced")
    assert not ok and f["error"] == f"stale result: its input {spm_copy} changed since it ran; make report reruns it"


def test_4_a_result_whose_input_is_gone_is_left_out_with_one_line(
    tmp_path: Path, spm_copy: Path, spm_results: Path
) -> None:
    _result(tmp_path / "res", "forced", Input.make("mine", str(spm_copy)), {}, [spm_copy], spm_results)
    spm_copy.unlink()
    assert results.load(tmp_path / "res", "forced") == ([], [])
    assert results.dropped(tmp_path / "res") == [f"forced/mine: left out, its input {spm_copy} is gone"]


def test_a_result_copied_onto_another_input_is_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spm_results: Path
) -> None:
    """Round three, 5: llama-spm's leak result filed as gpt-2's, its vocab fields edited: it
    measured llama-spm's file, so the report must not show it as gpt-2's, and the pool reruns it."""
    from llgbridge import batch

    monkeypatch.setattr(results, "RESULTS", tmp_path / "res")
    _result(tmp_path / "res", "leak", Input.make("llama-spm"), {}, [SPM], spm_results)
    r = json.loads((tmp_path / "res" / "leak" / "llama-spm.json").read_text())
    r["vocab"] = "gpt-2"
    for row in r["rows"]:
        row["vocab"] = "gpt-2"
    (tmp_path / "res" / "leak" / "gpt-2.json").write_text(json.dumps(r))
    ok, failed = results.load(tmp_path / "res", "leak")
    assert [x["vocab"] for x in ok] == ["llama-spm"]
    assert [f["vocab"] for f in failed] == ["gpt-2"]
    assert (
        "it was made from data/vocabs/ggml-vocab-llama-spm.gguf, not from data/vocabs/ggml-vocab-gpt-2.gguf"
        in failed[0]["error"]
    )
    assert batch.out_of_date("leak", "gpt-2", tmp_path / "res").startswith("it was made from")


def test_a_result_of_other_code_is_stale_in_the_report_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spm_results: Path
) -> None:
    """One judge of "current": a result whose recorded code version is not today's is stale for the
    report as it is for the pool (it used to be shown until the pool reran it)."""
    monkeypatch.setattr(results, "RESULTS", tmp_path / "res")
    out = _result(tmp_path / "res", "leak", Input.make("llama-spm"), {}, [SPM], spm_results)
    r = json.loads(out.read_text())
    r["provenance"]["code"] = "0" * 16
    out.write_text(json.dumps(r))
    ok, [f] = results.load(tmp_path / "res", "leak")
    assert not ok and f["error"] == "stale result: its code changed; make report reruns it"


def test_other_models_under_a_fixture_name_are_a_setting() -> None:
    """Round three, 4: `run matrix llama-spm -p models '["SmolLM2…"]'` wrote the main llama-spm result
    with SmolLM2's rows; `models` names an input only under make matrix's `model-NAME`."""
    smol = ["data/models/SmolLM2-135M-Instruct.Q4_1.gguf"]
    on_spm = Input.make("llama-spm", models=smol).param()
    assert params.changed("matrix", {"input": on_spm}) == {"models": smol}
    on_own = Input.make("model-SmolLM2-135M-Instruct.Q4_1", models=smol).param()
    assert params.changed("matrix", {"input": on_own}) == {}


def test_a_nul_byte_in_a_grammar_is_refused(tmp_path: Path) -> None:
    """Round three, 9: ctypes and argv stop at a NUL, so the grammar measured was `start: "ab"`."""
    with pytest.raises(InputError, match="parameter grammar: holds a NUL byte at character 11"):
        params.check("leak", {"grammar": 'start: "ab"\u0000 | /[0-9]+/'})


def test_text_typed_under_a_c_locale_is_the_text_typed() -> None:
    """Round three, 10: under LC_ALL=C Python decodes argv as ASCII with surrogate escapes."""
    env = {**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    r = subprocess.run(
        [sys.executable, str(PROGRAMS / "parse_literal.py"), "h\u00e9llo \u2713"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ascii("h\u00e9llo \u2713")


def test_4_the_main_report_takes_only_default_parameters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spm_results: Path
) -> None:
    monkeypatch.setattr(results, "RESULTS", tmp_path / "res")
    _result(tmp_path / "res", "forced", Input.make("llama-spm"), {"literal": "hi there"}, [SPM], spm_results)
    _result(tmp_path / "res", "leak", Input.make("llama-spm"), {}, [SPM], spm_results)
    assert len(results.load(tmp_path / "res", "leak")[0]) == 1
    ok, [f] = results.load(tmp_path / "res", "forced")
    assert not ok and "non-default parameters (literal='hi there')" in f["error"]


@pytest.mark.slow
def test_4_the_readme_by_hand_example_leaves_the_main_tables_alone() -> None:
    """`python -m llgbridge.run forced llama-spm -p literal 'hi there'`, then the report's forced table."""
    main = RESULTS / "forced" / "llama-spm.json"
    before = main.read_bytes() if main.exists() else None
    table_before = report.forced_section(RESULTS)
    assert run.main(["forced", "llama-spm", "-p", "literal", "hi there"]) == 0
    assert (main.read_bytes() if main.exists() else None) == before
    byhand = json.loads((results.BYHAND / "forced" / "llama-spm.json").read_text())
    assert byhand["literal"] == "hi there" and byhand["provenance"]["params"]["literal"] == "hi there"
    after = report.forced_section(RESULTS)
    assert [t.df.to_csv() for t in (after.raw if after else [])] == [
        t.df.to_csv() for t in (table_before.raw if table_before else [])
    ]


def test_4_a_model_given_to_make_matrix_never_takes_a_synthetic_models_name() -> None:
    assert run.model_name("some/dir/llama-spm.gguf") == "model-llama-spm"
    assert run.model_name("my model;rm -rf.gguf") == "model-my_model_rm_-rf"
    assert not paths.name_problem(run.model_name("-x y.gguf"))


def test_4_the_synthetic_model_cache_is_keyed_by_content(tmp_path: Path) -> None:
    models = tmp_path / "models"
    a = synth.ensure_model("mine", models, vocab_file=SPM)
    made = a.stat().st_mtime_ns
    assert synth.ensure_model("mine", models, vocab_file=SPM).stat().st_mtime_ns == made  # same file: reused
    other = shutil.copy(vocab_path("llama-bpe"), tmp_path / "mine.gguf")
    b = synth.ensure_model("mine", models, vocab_file=Path(other))  # same name, other tokenizer
    assert Vocab(b).n_tokens == Vocab(Path(other)).n_tokens != Vocab(SPM).n_tokens


# -- 5. inconsistent tokenizers pass as ok ---------------------------------------------------------
@pytest.mark.parametrize(
    "change, says",
    [
        (_eos_out_of_range, "inconsistent tokenizer: tokenizer.ggml.eos_token_id = 99999 is outside the 32000 tokens"),
        (
            lambda k, v: v + [0.0] if k == Keys.Tokenizer.SCORES else v,
            "32000 tokens but 32001 entries in tokenizer.ggml.scores",
        ),
        (lambda k, v: 7 if k == Keys.Tokenizer.PAD_ID else v, ""),  # in range: loads
        (
            lambda k, v: v[:300] + [v[301]] + v[301:] if k == Keys.Tokenizer.LIST else v,
            "tokenizer.ggml.tokens[301] repeats token 300",
        ),
        (
            lambda k, v: v[:300] + [b"a\0b"] + v[301:] if k == Keys.Tokenizer.LIST else v,
            "tokenizer.ggml.tokens[300] holds a NUL byte",
        ),
    ],
)
def test_5_an_inconsistent_tokenizer_is_refused_before_llama_cpp_sees_it(
    tmp_path: Path, change: Any, says: str
) -> None:
    p = write_vocab(tmp_path / "v.gguf", change)
    if not says:
        assert Vocab(p).n_tokens == 32000
        return
    assert says in _one_line_refusal(p)


# -- 6. an abort inside llama.cpp loses its cause ------------------------------------------------
@pytest.mark.slow
def test_6_an_abort_keeps_its_cause_and_its_log(tmp_path: Path) -> None:
    nb = abort_notebook(tmp_path)
    out = subprocess.run(
        [
            sys.executable,
            str(PROGRAMS / "execute.py"),
            "abort",
            "x",
            str(tmp_path / "r"),
            str(tmp_path / "res"),
            str(nb),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    st = json.loads(out.stdout.splitlines()[-1])
    assert st["status"] == "failed" and st["error"].startswith("the kernel died: llama-vocab.cpp:"), st
    assert (
        "GGML_ASSERT(id_to_token.size() == token_to_id.size()) failed" in st["error"]
        and "/" not in st["error"].split(":")[0]
    )
    assert "GGML_ASSERT" in (tmp_path / "r" / st["log"]).read_text()
    assert len(out.stdout.splitlines()) + len(out.stderr.splitlines()) < 10, out.stderr[-2000:]  # no gdb flood


# -- 7. environment errors -------------------------------------------------------------------------
def test_7_an_unwritable_output_folder_is_one_line_and_the_result_says_so(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("a file where a folder should be")
    st = run.execute("census", "llama-spm", out_root=blocked / "reports", results_dir=tmp_path / "res")
    assert st["status"] == "failed" and st["error"] == f"{blocked / 'reports' / 'logs'}: Not a directory", st
    assert json.loads((tmp_path / "res" / "census" / "llama-spm.json").read_text())["error"] == st["error"]
    st = run.execute("census", "llama-spm", out_root=blocked / "reports", results_dir=blocked / "res")
    assert st["unwritten"] == f"{blocked / 'res' / 'census'}: Not a directory", st


def test_7_a_full_disk_while_writing_a_result_names_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spm_results: Path
) -> None:
    from llgbridge import nb

    def full(path: Path, data: Any) -> None:
        raise OSError(28, os.strerror(28), str(path))

    monkeypatch.setattr(nb, "write_json", full)
    with pytest.raises(InputError, match=r"census/llama-spm.json: No space left on device$"):
        nb.write_result(
            str(tmp_path), "census", "llama-spm", json.loads((spm_results / "census" / "llama-spm.json").read_text())
        )


def test_7_atomic_writes_follow_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o002)
    try:
        paths.write_atomic(tmp_path / "a.txt", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o664


# -- 8. messages that do not name the cause --------------------------------------------------------
@pytest.mark.parametrize(
    "notebook, name, value, says",
    [
        ("forced", "bridges", [["upstream"]], "parameter bridges: element 0 should be str, got list ['upstream']"),
        ("matrix", "cases", [[1]], "parameter cases: element 0 should be str, got list [1]"),
        ("matrix", "input", {"name": "x", "models": [1]}, "parameter input: models: expected a list of file names"),
        ("census", "results_dir", 5, "parameter results_dir: expected str, got int 5"),
        (
            "forced",
            "literal",
            "\ud800",
            "parameter literal: is not valid text ('\\ud800' at character 0 cannot be written as UTF-8)",
        ),
        ("forced", "max_steps", -1, "parameter max_steps: must be at least 1, got -1"),
        ("exactness", "n_inputs", 0, "parameter n_inputs: must be at least 1, got 0"),
        ("soundness", "seed", -3, "parameter seed: must be at least 0, got -3"),
        ("matrix", "temperature", True, "parameter temperature: expected number, got bool True"),
        ("forced", "colour", "red", "parameter colour: forced has no such parameter"),
        ("census", "input", "../../x", "parameter input: '../../x' is not a usable input name"),
        (
            "census",
            "input",
            {"name": "x", "overrides": ["k=bool:1"]},
            "parameter input: override 'k=bool:1': '1' is not",
        ),
    ],
)
def test_8_every_parameter_is_checked_in_full(notebook: str, name: str, value: Any, says: str) -> None:
    with pytest.raises(InputError) as e:
        params.check(notebook, {name: value})
    assert str(e.value).startswith(says) and "\n" not in str(e.value), str(e.value)


def test_8_run_refuses_before_any_kernel(capsys: pytest.CaptureFixture[str]) -> None:
    assert run.main(["forced", "llama-spm", "-p", "colour", "red"]) == 2
    assert run.main(["forced", "llama-spm", "-p", "max_steps", "-5"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "[forced] llama-spm: parameter colour: forced has no such parameter (it takes input, literal, bridges, "
        "with_candidates, max_steps, results_dir)",
        "[forced] llama-spm: parameter max_steps: must be at least 1, got -5",
    ]


def test_8_the_notebooks_check_as_run_does() -> None:
    from llgbridge import nb

    with pytest.raises(InputError, match="parameter bridges: element 0 should be str"):
        nb.check_params("leak", {"input": "llama-bpe", "bridges": [["upstream"]], "grammar": "start: /a/"})


def test_8_a_device_or_a_pipe_is_not_an_empty_file(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)
    for p in (Path("/dev/zero"), fifo):
        assert _one_line_refusal(p).endswith("not a regular file (a device, a pipe or a socket), not a GGUF file")


def test_8_llguidance_stop_reasons_are_spelled_out() -> None:
    dump = "NoExtensionBias\n<state>\nTokens: ⟦⟧\n</state><grammar>\n\n</grammar>"
    assert cause_line(dump) == "no token of this vocab can continue the grammar (llguidance stopped: NoExtensionBias)"
    assert cause_line("panic: assertion failed\n<backtrace>\n   0: <unknown>") == "panic: assertion failed"


# -- 9. untrusted names reach paths and shells ---------------------------------------------------
def test_9_whatif_refuses_a_name_that_leaves_its_folder(tmp_path: Path, spm_copy: Path) -> None:
    for bad in ("../../..", "a/b", "-x"):  # (an empty NAME is no NAME: the file's own name is taken)
        with pytest.raises(InputError, match="NAME: .* is not a usable input name"):
            whatif.whatif(spm_copy, name=bad, out=None)
    odd = spm_copy.rename(tmp_path / "my vocab:2.gguf")
    assert whatif.safe_name(odd) == "my_vocab_2"


def test_9_a_result_never_lands_outside_its_folder() -> None:
    from llgbridge import nb

    with pytest.raises(InputError, match="not a usable input name"):
        nb.result_path("data/results", "census", "../../../tmp/x")
    with pytest.raises(InputError, match="not a usable input name"):
        run.execute("census", "../x")


def _tree_copy(tmp_path: Path, fixtures_kept: tuple[str, ...] = ()) -> tuple[Path, dict[str, str]]:
    """A copy of the tree to run `make` in (`regen.tree_copy`: the venv shared, its stamp newer
    than the copy's pyproject.toml), so a test never writes the real data/ or reports/: with
    none of the real data/ linked in, and only `fixtures_kept` of the fixtures."""
    tree = regen.tree_copy(tmp_path)
    for link in (tree / "data").iterdir():
        link.unlink()  # the shared native build, models and schemas: this test's own, or none
    manifest = tree / "lib" / "llgbridge" / "vocabs.sha256"
    manifest.write_text(
        "".join(
            ln + "\n" for ln in manifest.read_text().splitlines() if ln.split()[-1:] and ln.split()[-1] in fixtures_kept
        )
    )
    vocabs = tree / "data" / "vocabs"
    vocabs.mkdir(parents=True)
    for name in fixtures_kept:
        (vocabs / name).symlink_to(VOCABS / name)
    (vocabs / ".complete").touch()
    census_needs_no_models(tree)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS")}
    env["PYTHONPATH"] = str(tree / "lib")  # before the venv's editable path to the real tree
    return tree, env


def test_9_a_user_value_never_reaches_a_shell(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    tree, env = _tree_copy(tmp_path, ("ggml-vocab-llama-spm.gguf",))
    for target, var in (
        ("whatif", "VOCAB"),
        ("whatif", "NAME"),
        ("matrix", "MODELS"),
        ("whatif", "PARAMS"),
        ("gguf-fuzz", "N"),
        ("gguf-fuzz", "SEED"),
        ("whatif", "OVERRIDE"),
        ("matrix", "OVERRIDE"),
    ):
        value = f'x"; touch {marker}; echo "'
        extra = [] if var == "VOCAB" else ["VOCAB=" + str(SPM) if target == "whatif" else ""]
        subprocess.run(
            ["make", "-s", target, f"{var}={value}", "STAMP=.stamp", *[e for e in extra if e]],
            cwd=tree,
            capture_output=True,
            timeout=120,
            env=env,
        )
        assert not marker.exists(), (target, var)


def test_a_long_params_reaches_whatif_whole(tmp_path: Path) -> None:
    """Round three, 16: Make repeats a command-line PARAMS in MAKEFLAGS with every space escaped,
    and a 99 KB grammar of short words took it past the kernel's 128 KiB per string: the recipe's
    shell never started ("/bin/bash: Argument list too long", naming nothing). An unknown
    parameter makes whatif refuse it before any analysis runs, so this reads whatif's own line."""
    tree, env = _tree_copy(tmp_path, ("ggml-vocab-llama-spm.gguf",))
    value = "-p nosuch '" + "a " * 49500 + "'"
    assert len(value) > 99_000
    out = subprocess.run(
        ["make", "-s", "whatif", f"VOCAB={SPM}", f"PARAMS={value}", "STAMP=.stamp"],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 2, out.stderr[-500:]
    assert out.stderr.splitlines()[0] == (
        "whatif: parameter nosuch: no analysis notebook takes it (census, leak, forced, engines, probe, exactness, "
        "soundness, native, matrix, server)"
    ), out.stderr[-500:]


def test_a_real_models_text_stays_out_of_the_committed_table() -> None:
    """Round three, 18: Gemma 3 270M's `no_space` case at temperature 0 wrote 'raphael,red,andblueare'
    on one machine and 'ellow,blue,andredarea' on another of the same kind (a venv built with
    -march=native picks its quantized kernels by CPU). The committed table keeps what the grammar
    decides; the text and its length stay in the result file."""
    from llgbridge import generate as R
    from llgbridge.analyses.matrix import compute as matrix

    def row(synthetic: bool, text: str) -> R.MatrixRow:
        return R.MatrixRow(
            model="m.gguf",
            vocab="gemma3-270m",
            synthetic=synthetic,
            case="no_space",
            bridge="fixed",
            outcome="pass",
            llg_errors=0,
            greedy=False,
            n_tokens=len(text),
            output=text,
            prompt="completion",
            tokens=[1] * len(text),
        )

    here, there = row(False, "raphael,red,andblueare"), row(False, "ellow,blue,andredarea")
    assert here.row() == there.row()
    assert (here.row()["outcome"], here.row()["output"], here.row()["n_tokens"]) == ("pass", "", 0)
    assert row(True, "..!").row()["output"] == "..!"  # a synthetic model's text is kept (`recorded_output`)
    p = matrix.Matrix([], matrix.Settings([], []), rows=[here, row(True, "..!")]).payload()
    assert p["outputs"] == ["raphael,red,andblueare", "..!"]


# -- the end-to-end: three hostile inputs dropped into a make report ------------------------
@pytest.mark.slow
def test_make_report_with_three_hostile_inputs(tmp_path: Path) -> None:
    """A copy of the tree with two fixtures and three hostile files; only the census runs (the
    cheapest analysis: each hostile input breaks it). Every other input completes, the report
    is written, each hostile one is named in one line, and make exits non-zero."""
    tree, env = _tree_copy(tmp_path, ("ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf"))
    vocabs = tree / "data" / "vocabs"
    write_vocab(vocabs / "ggml-vocab-big.gguf", _big_piece)
    write_vocab(vocabs / "ggml-vocab-eos.gguf", _eos_out_of_range)
    shutil.copy(SPM, vocabs / "ggml-vocab--dash.gguf")
    (vocabs / ".complete").touch()
    (tree / "data" / "native").mkdir()
    (tree / "data" / "native" / ".built").touch()  # the census needs no native build, nor a server
    (tree / "data" / "native" / "server").mkdir()
    (tree / "data" / "native" / "server" / ".built").touch()
    # the report's own path: the pool (llgbridge.batch) with the census alone
    out = subprocess.run(
        ["make", "report", *CENSUS_ONLY],
        cwd=tree,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert out.returncode != 0, out.stdout[-3000:] + out.stderr[-3000:]
    inputs = (tree / "reports" / "tables" / "inputs.csv").read_text().splitlines()
    assert "census,gpt-2,ok," in inputs and "census,llama-spm,ok," in inputs, inputs
    failed = [ln for ln in out.stderr.splitlines() if ln.startswith("FAILED")]
    assert len(failed) == 3, out.stderr
    assert any("census/big:" in ln and "16384 bytes" in ln for ln in failed), failed
    assert any("census/eos:" in ln and "eos_token_id = 99999" in ln for ln in failed), failed
    assert any("ggml-vocab--dash.gguf: refused file name" in ln for ln in failed), failed
    assert (
        "ggml-vocab--dash.gguf: refused file name" in out.stderr.splitlines()[0]
    )  # said once when Make asked for names
