"""Issue 48, the inputs' breaks (4, 5, 9, 10): each refused or failed in one line, up front where it
can be, never published as a finding. Each test writes its hostile input itself: a GGUF whose chat
template raises in the server, two what-ifs whose names collide, a fixture edited in place, an
override llama.cpp would drop and a GGUF cut short."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import SPM

from llgbridge.paths import REPORTS, ROOT, VOCABS


def _env(**extra: str) -> dict[str, str]:
    drop = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "VOCAB", "NAME", "PARAMS", "MODELS", "OVERRIDE", "ANALYSES", "CUDA"}
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **extra}


def _make(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", "-s", *args], cwd=ROOT, capture_output=True, text=True, env=_env(), timeout=300)


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The command's one line on stderr (Make's own 'Error 2' line aside)."""
    lines = [ln for ln in done.stderr.splitlines() if not ln.startswith("make: ***")]
    assert len(lines) == 1, done.stderr
    return lines[0]


# -- break 10: refusals that came late or named the wrong thing ------------------------------------------
LATE = {
    # an unknown key, an int for a bool, a key of another architecture, a token id llama.cpp drops
    "tokenizer.ggml.colour=str:red": "no such key: not in spm10.gguf (llama), nor one llama.cpp reads",
    "tokenizer.ggml.add_space_prefix=int:1": "llama.cpp reads tokenizer.ggml.add_space_prefix as bool, not int",
    "qwen2.context_length=int:64": "qwen2.context_length is a key of the qwen2 architecture; llama.cpp never reads it",
    "tokenizer.ggml.eos_token_id=int:99999": (
        "token 99999 is outside the 32000 tokens of spm10.gguf (llama): llama.cpp drops it"
    ),
}


@pytest.mark.parametrize("override", sorted(LATE))
def test_10_an_override_llama_cpp_would_not_take_is_refused_up_front(tmp_path: Path, override: str) -> None:
    """Each was refused only after about 18 runs (a 106-file report), or passed 7 analyses, or was
    dropped by llama.cpp and the page said it "changes nothing". Now `make whatif` and `make matrix`
    refuse it in one line naming the override and the cause, exit 2, before anything runs."""
    mine = tmp_path / "spm10.gguf"
    shutil.copy(SPM, mine)
    name = f"spm10-{abs(hash(override)) % 10**6}"
    done = _make("whatif", f"VOCAB={mine}", f"NAME={name}", f"OVERRIDE={override}")
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    line = _one_line(done)
    assert line.startswith(f"whatif: override {override!r}: "), line
    assert LATE[override] in line, line
    assert "analyses on" not in done.stdout and not (REPORTS / "whatif" / name).exists()
    matrix = _make("matrix", f"MODELS={mine}", f"OVERRIDE={override}")
    assert matrix.returncode == 2, matrix.stdout[-2000:] + matrix.stderr[-2000:]
    said = _one_line(matrix)
    assert f"override {override!r}: " in said and LATE[override] in said, said
    assert " ..." not in matrix.stdout, matrix.stdout  # no run started


def test_10_a_truncated_gguf_given_to_make_whatif_is_refused_before_the_pool_starts(tmp_path: Path) -> None:
    cut = tmp_path / "cut10.gguf"
    cut.write_bytes((VOCABS / "ggml-vocab-gpt-2.gguf").read_bytes()[:100_000])
    done = _make("whatif", f"VOCAB={cut}", "NAME=cut10")
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    line = _one_line(done)
    assert line.startswith(f"whatif: {cut}: truncated GGUF: "), line
    assert "analyses on" not in done.stdout and not (REPORTS / "whatif" / "cut10").exists()


# -- break 5: two what-ifs with the same name mixed their results --------------------------------------
def test_5_colliding_what_ifs_get_folders_of_their_own_and_one_runs_at_a_time(tmp_path: Path) -> None:
    """`general.name=str:a b` and `str:a_b` on one file are both `spm5+name-a_b`, and two files called
    spm5.gguf are both `spm5`: each landed in reports/whatif/NAME/, one's results over the other's.
    The folder is keyed by what the what-if is (the file's sha256, the overrides); the same what-if
    started while one runs is refused in one line naming the process that holds it."""
    from llgbridge import whatif
    from llgbridge.overrides import parse_all, suffix

    mine = tmp_path / "spm5.gguf"
    shutil.copy(SPM, mine)
    spaced, joined = parse_all(["general.name=str:a b"]), parse_all(["general.name=str:a_b"])
    assert suffix(spaced) == suffix(joined)  # the names collide ...
    assert whatif.folder(mine, "spm5+name-a_b", spaced) != whatif.folder(mine, "spm5+name-a_b", joined)
    other = tmp_path / "elsewhere" / "spm5.gguf"
    other.parent.mkdir()
    changed = bytearray(SPM.read_bytes())
    changed[-1] ^= 1
    other.write_bytes(changed)
    assert whatif.folder(mine, "spm5", ()) != whatif.folder(other, "spm5", ())  # ... the folders do not
    assert whatif.folder(mine, "spm5", ()) == whatif.folder(tmp_path / "spm5.gguf", "spm5", ())
    out = REPORTS / "whatif" / whatif.folder(mine, "spm5", ())
    out.mkdir(parents=True)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            "f = open(sys.argv[1], 'a+'); fcntl.flock(f, fcntl.LOCK_EX); f.write(f'{os.getpid()}\\n'); f.flush()\n"
            "print('held', flush=True); time.sleep(120)",
            str(out / ".lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        done = _make("whatif", f"VOCAB={mine}")
        assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
        assert _one_line(done) == (
            f"whatif: {out.relative_to(ROOT)}: the same what-if (this file, these overrides) is running in "
            f"process {holder.pid}; wait for it to end"
        )
        assert "analyses on" not in done.stdout
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        shutil.rmtree(out)


# -- break 9: an edited fixture was republished under its official name ---------------------------------
def test_9_a_shipped_vocab_edited_in_place_is_refused_by_name(tmp_path: Path) -> None:
    """A byte of data/vocabs/ggml-vocab-llama-spm.gguf changed in place: it was measured and published
    as llama-spm. Now the input list Make runs leaves it out, the report names it as refused (exit
    non-zero through its failed inputs), and the other inputs go on."""
    from llgbridge import fixtures

    vocabs = tmp_path / "vocabs"
    vocabs.mkdir()
    for name in ("llama-spm", "gpt-2"):
        shutil.copy(VOCABS / f"ggml-vocab-{name}.gguf", vocabs / f"ggml-vocab-{name}.gguf")
    assert fixtures.refused(vocabs) == [] and {"llama-spm", "gpt-2"} <= set(fixtures.vocab_names(vocabs))
    spm = vocabs / "ggml-vocab-llama-spm.gguf"
    data = bytearray(spm.read_bytes())
    data[-1] ^= 1  # the last token's last score byte: still a well-formed GGUF
    spm.write_bytes(data)
    names = fixtures.vocab_names(vocabs)
    assert "llama-spm" not in names and "gpt-2" in names
    [refused] = fixtures.refused(vocabs)
    assert refused["vocab"] == "llama-spm" and "\n" not in refused["error"]
    assert refused["error"].startswith(
        "refused: ggml-vocab-llama-spm.gguf: its sha256 no longer matches lib/llgbridge/vocabs.sha256"
    ), refused
