"""Issue 48, the servers' faults (breaks 4 and 13): a llama-server that never starts is a fault of
the run, never a build that broke no grammar; a chat template that takes all the memory is one line.

Each test writes its hostile input itself with `gguf`: llama-spm's tokenizer with a chat template
the server cannot render (it raises, or is not Jinja), made into a synthetic model as any what-if's
file is.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import gguf
import pytest

from llgbridge import generation as G
from llgbridge import nb, report, synth
from llgbridge.analyses.server import compute as server
from llgbridge.analyses.server import llama_server as S
from llgbridge.modelfile import ModelFile
from llgbridge.paths import vocab_path
from llgbridge.vocab import Vocab

PIN = S.LLG_PINNED
RAISES = "{{ raise_exception('x') }}"
NOT_JINJA = "{% if %}"
CASES = ["forced_literal", "dots"]


def templated_model(folder: Path, name: str, template: str) -> Path:
    """A synthetic model whose tokenizer is llama-spm's with `template` as its chat template."""
    source = folder / f"{name}.vocab.gguf"
    w = gguf.GGUFWriter(str(source), "llama")
    for key, (value, vtype, sub) in synth._tokenizer_kv(vocab_path("llama-spm")).items():
        if key != gguf.Keys.Tokenizer.CHAT_TEMPLATE:
            w.add_key_value(key, value, vtype, sub)
    w.add_chat_template(template)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return synth.make_model(source, folder / f"{name}.gguf")


def _build(model: Path, sampler: str, log: Path) -> tuple[list[server.ServerRow], float]:
    return server.run_cases(
        server.ServerRun(
            S.binary(sampler, PIN), model, Vocab(model, model.stem), True, PIN, sampler, CASES,
            {c: G.PLAIN for c in CASES}, log, 16, 0, 0.0,
        )
    )  # fmt: skip


# -- break 4: a what-if on which no server can start --------------------------------------------------
@pytest.mark.skipif(bool(S.built()[1]), reason=f"servers not built: {S.built()[1]}")
@pytest.mark.parametrize("template", [RAISES, NOT_JINJA], ids=["raises", "not-jinja"])
def test_4_a_server_that_never_starts_fails_the_run_naming_the_build_model_and_log(
    tmp_path: Path, template: str
) -> None:
    model = templated_model(tmp_path, "tmpl4", template)
    for sampler in S.SAMPLERS:  # without and with the fix: a fault of the run, never error rows
        with pytest.raises(server.ServerFault) as e:
            _build(model, sampler, tmp_path / f"{sampler}.log")
        msg = str(e.value)
        assert "\n" not in msg, msg
        assert msg.startswith(f"server llama-server-{sampler}-{PIN} on tmpl4.gguf: never started"), msg
        assert "exited with 1 while loading tmpl4.gguf" in msg and "model loading error" in msg, msg
    # a candidate patch's build that does not start stays its error rows beside the two that ran
    rows, _ = _build(model, S.CANDIDATE_BUILDS[0], tmp_path / "candidate.log")
    assert [r.outcome for r in rows] == ["error"] * len(CASES)
    assert all("exited with 1 while loading tmpl4.gguf" in r.error for r in rows)


@pytest.mark.skipif(bool(S.built()[1]), reason=f"servers not built: {S.built()[1]}")
def test_4_the_page_says_the_server_part_could_not_be_made(tmp_path: Path) -> None:
    model = templated_model(tmp_path, "tmpl4", RAISES)
    opts = server.RunOptions(candidates=(), log_dir=tmp_path / "logs")
    with pytest.raises(server.ServerFault) as e:
        server.run("tmpl4", ModelFile.read(model), True, None, CASES, opts, say=lambda s: None)
    res = tmp_path / "results"
    (res / "server").mkdir(parents=True)
    failed = {"status": "failed", "notebook": "server", "vocab": "tmpl4", "error": f"ServerFault: {e.value}"}
    (res / "server" / "tmpl4.json").write_text(json.dumps(failed))
    sec = report.server_section(res)
    assert sec is not None
    assert sec.text.startswith("**The server part could not be made**"), sec.text
    assert "tmpl4: ServerFault: server llama-server-upstream" in sec.text and "never started" in sec.text
    assert "no request broke its grammar" not in sec.text + sec.more + sec.claim


# -- break 13: a chat template that takes all the memory ----------------------------------------------
# 112 bytes: a string doubled 40 times, 8 TiB, rendered by every server at start
DOUBLING = (
    "{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}"
)


@pytest.mark.skipif(bool(S.built()[1]), reason=f"servers not built: {S.built()[1]}")
def test_13_a_chat_template_that_takes_all_memory_stops_its_server_in_one_line(tmp_path: Path) -> None:
    model = templated_model(tmp_path, "tmpl13", DOUBLING)
    t0 = time.monotonic()
    with pytest.raises(server.ServerFault) as e:
        _build(model, "fixed", tmp_path / "fixed.log")
    took = time.monotonic() - t0
    msg = str(e.value)
    assert "\n" not in msg, msg
    gib = S.MEMORY_HEADROOM >> 30
    assert f"llama-server-fixed-{PIN} on tmpl13.gguf: the chat template took more than {gib // 2} GiB" in msg, msg
    assert took < S.STARTUP_TIMEOUT / 2, took  # stopped at its bound, not after the start timeout
    # a real model's server starts under the same bound
    with S.serve(S.binary("fixed", PIN), synth.ensure_model("llama-spm"), tmp_path / "spm.log") as srv:
        assert S._peak(srv.proc.pid) < S.memory_bound(srv.model) - S.MEMORY_HEADROOM // 2


@pytest.mark.skipif(bool(S.built()[1]), reason=f"servers not built: {S.built()[1]}")
def test_13_the_page_states_the_servers_memory_bound_and_start_timeout(tmp_path: Path) -> None:
    path = synth.ensure_model("llama-spm")
    run = server.run(
        "llama-spm", ModelFile.read(path), True, None, ["forced_literal"],
        server.RunOptions(samplers=("fixed",), candidates=(), log_dir=tmp_path / "logs"), say=lambda s: None,
    )  # fmt: skip
    settings = {"temperature": 0.0, "seed": 0, "max_tokens": 64, "n_gpu_layers": 0, "parallel": 4}
    nb.write_result(str(tmp_path / "results"), "server", "llama-spm", server.payload(path, run, settings))
    sec = report.server_section(tmp_path / "results")
    assert sec is not None
    gib, secs = S.MEMORY_HEADROOM >> 30, f"{S.STARTUP_TIMEOUT:.0f}"
    assert f"its model file and {gib} GiB of address space, and must answer `/health` within {secs} s" in sec.more


# -- break 13, the analyses' half: the same template through llama-cpp-python, in a kernel -----------
def test_13_a_chat_template_that_takes_all_memory_fails_its_analysis_in_one_line(tmp_path: Path) -> None:
    """The matrix on a model whose chat template doubles a string 40 times: llama-cpp-python's
    Jinja2ChatFormatter grew the kernel to the machine's memory (MemoryError after minutes, or the
    machine's own end). Its worker bounds its kernel's address space (here 3 GiB, as
    LLGBRIDGE_MEMORY_GIB says): one line naming the bound, a failed run, in seconds."""
    import subprocess
    import sys

    model = templated_model(tmp_path, "tmpl13m", DOUBLING)
    out = subprocess.run(
        [sys.executable, "-m", "llgbridge.run", "matrix", f"--models={model}", "--results", str(tmp_path / "r"),
         "--out-root", str(tmp_path / "o"), "-p", "cases", '["forced_literal"]', "-p", "prompt", "chat"],
        capture_output=True, text=True, timeout=600, env={**os.environ, "LLGBRIDGE_MEMORY_GIB": "3"},
    )  # fmt: skip
    said = out.stdout + out.stderr
    assert out.returncode != 0, said[-2000:]
    assert "memory bound, 3 GiB of address space" in said, said[-2000:]
