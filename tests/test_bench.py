"""The C census loop of `make bench` agrees with the Python census, token for token counts; the
bench's parts of a census process add up to its wall; the fast walk of a GGUF's string arrays
names the same byte as the format's own reader where a file is cut."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import vocab
from gguf import GGUFReader

from llgbridge import census
from llgbridge.errors import InputError
from llgbridge.gguf_meta import read_kv
from llgbridge.measure import bench, census_c
from llgbridge.measure import native_split as NS
from llgbridge.measure.benchmd import render, render_parts
from llgbridge.measure.census_c import Census
from llgbridge.measure.whatif_time import whatif_context
from llgbridge.paths import ROOT, VOCABS


def test_c_loop_agrees_with_python_census() -> None:
    binary = bench.compile_c()
    names = ["llama-spm", "llama-bpe", "bert-bge"]
    out = subprocess.run(
        [str(binary), *(str(VOCABS / f"ggml-vocab-{n}.gguf") for n in names)],
        capture_output=True,
        text=True,
        check=True,
    )
    got = bench.parse(out.stdout)
    for n in names:
        c = census.run_census(vocab(n))
        line = got[n]
        assert (line.n_tokens, line.differing, line.lost) == (c.n_tokens, c.differing, c.lost_leading_space)


def test_both_census_processes_in_parts_add_up_to_their_wall() -> None:
    paths = [str(VOCABS / f"ggml-vocab-{n}.gguf") for n in ("llama-spm", "bert-bge")]
    c = census_c.run_child([str(bench.compile_c()), *paths])
    py = census_c.run_child([sys.executable, "-m", "llgbridge.measure.census_worker", *paths])
    census_c.check_agree(py, c)  # raises where the counts differ
    for run in (py, c):
        parts = run.parts()
        assert list(parts) == [k for k, _ in census_c.PARTS]
        assert 0 < run.start < run.wall and parts["write"] > 0
        assert abs(sum(parts.values()) - run.wall) < 1e-9
        for line in run.lines.values():
            assert 0 < line.load < line.seconds and 0 <= line.free < line.seconds and line.compute > 0
    page = render_parts([Census([], [py], [c], 0.0, {"machine": "m", "nproc": "2", "loadavg": "0", "repeat": "1"})])
    assert page.startswith("# Census: Python vs C\n") and "## " not in page  # the census section alone
    wall_row = next(row for row in page.splitlines() if row.startswith("| **process wall**"))
    assert [x.strip() for x in wall_row.split("|")[2:4]] == [f"{py.wall:.3f}", f"{c.wall:.3f}"]


def test_the_native_split_counts_one_harness_process_per_llguidance_version() -> None:
    """`native_split` on a vocab with no end-of-turn text: one harness process per version serves
    every sampler's walks and llama.cpp's tests against each (2 tests x 2 samplers per version, and
    the PR's test on each candidate at the pin), no test in a binary of its own; its parts add up to
    the wall, and its page has the section alone."""
    from llgbridge import native

    if native.unavailable():
        pytest.skip(native.unavailable())
    (row,) = NS.native_split(("bert-bge",))
    versions = native.built_versions()
    assert row["processes"] == len(versions)
    assert row["tests"] == 4 * len(versions) + len(native.CANDIDATES)
    assert row["test_own"] == 0 and row["test_work"] > 0
    assert abs(sum(row[k] for k, _ in NS.NATIVE_PARTS) - row["wall"]) < 1e-9
    page = render({"native_split": {"table": NS.native_split_table([row])}})
    assert page.startswith("## The native analysis in parts\n") and page.count("## ") == 1


def test_the_whatif_section_judges_the_plain_what_if_against_issue_33s_20_s() -> None:
    """The goal reads the plain what-if's wall, not the override's two sides, and a what-if with a
    failed run meets no goal however fast (hand-made rows: running three what-ifs is bench's job)."""
    from llgbridge.measure import whatif_time as W

    def rows(plain: float, failed: int = 0) -> list[dict[str, object]]:
        return [
            {
                "run": "plain",
                "vocab": "llama-spm",
                "wall": plain,
                "walls": [23.2, plain, 15.1],
                "analyses": 9,
                "failed": failed,
            },
            {"run": W.RUNS[2][0], "vocab": "llama-spm", "wall": 25.0, "walls": [25.0], "analyses": 18, "failed": 0},
        ]

    assert W.verdict(rows(16.04)) == "goal <= 20 s for the plain what-if: met (16.0 s, median of 3)"
    assert W.verdict(rows(20.6)) == "goal <= 20 s for the plain what-if: not met (20.6 s, median of 3)"
    assert W.verdict(rows(16.0, failed=1)).startswith("goal <= 20 s for the plain what-if: not met")
    page = render({"whatif": whatif_context(rows(16.04))})
    assert page.startswith("## A what-if, end to end\n") and page.count("## ") == 1
    assert "| plain | 9 | 0 | 16.0 | 23.2, 16.0, 15.1 |" in page and "met (16.0 s, median of 3)" in page


def test_the_server_split_counts_one_server_start_per_build() -> None:
    """`server_split` on llama-spm's synthetic model with two cases: one server start per build
    (each sampler on each llguidance version, and each candidate on the pin), not one per case;
    two requests on each (the cases) and the unconstrained baseline on the first only (it runs no
    grammar sampler); its parts add up to the wall."""
    from llgbridge import llama_server
    from llgbridge.measure import server_split as SS

    status, why = llama_server.built()
    if why:
        pytest.skip(why)
    (row,) = SS.server_split(("llama-spm",), ["forced_literal", "no_space"])
    builds = len(status["llguidance"]) * len(llama_server.SAMPLERS) + len(llama_server.CANDIDATES)
    assert (row["starts"], row["requests_n"]) == (builds, 2 * builds + 1)
    assert abs(sum(row[k] for k, _ in SS.SERVER_PARTS) - row["wall"]) < 1e-9
    assert row["requests"] > 0 and row["start"] > 0


def test_the_census_worker_imports_only_the_census() -> None:
    # the worker's start is timed against the C program's: the bench's own tools stay out of it
    p = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "llgbridge.measure.census_worker",
            str(VOCABS / "ggml-vocab-bert-bge.gguf"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    imported = {row.rsplit("|", 1)[-1].strip() for row in p.stderr.splitlines() if row.startswith("import time:")}
    assert {"llgbridge.census", "llgbridge.vocab"} <= imported
    assert not imported & {
        "tqdm",
        "llgbridge.measure.bench",
        "llgbridge.measure.maskpath",
        "llgbridge.llg",
        "llguidance",
        "pandas",
        "llgbridge.report",
        "argparse",
        "statistics",
        "subprocess",
    }, imported


def _cut_messages(r: GGUFReader, key: str, elements: list[int]) -> list[tuple[int, str]]:
    """(cut, message) pairs where a cut inside element j's length field or its bytes must end the
    walk, each element's offset taken from gguf's own reader `r`."""
    base = r.data.__array_interface__["data"][0]
    f = r.fields[key]
    out = []
    for j in elements:
        data = f.parts[f.data[j]]
        length = f.parts[f.data[j] - 1]
        at = data.__array_interface__["data"][0] - base
        length_at = length.__array_interface__["data"][0] - base
        out.append(
            (
                length_at + 3,
                f"truncated GGUF: length of {key}[{j}] at byte {length_at} needs 8 bytes, file has {length_at + 3}",
            )
        )
        assert data.nbytes > 0  # a cut inside an empty string's bytes would be inside its length field
        cut = at + data.nbytes - 1
        out.append((cut, f"truncated GGUF: {key}[{j}] at byte {at} needs {data.nbytes} bytes, file has {cut}"))
    return out


@pytest.mark.parametrize("name, key", [("bert-bge", "tokenizer.ggml.tokens"), ("gpt-2", "tokenizer.ggml.merges")])
def test_a_cut_string_array_names_the_element_and_byte_the_reader_sees(tmp_path: Path, name: str, key: str) -> None:
    src = VOCABS / f"ggml-vocab-{name}.gguf"
    data = src.read_bytes()
    n = read_kv(src)[0][key].count
    reader = GGUFReader(src)  # one parse: seconds on gpt-2's 50k merges
    assert n == len(reader.fields[key].data)
    for cut, says in _cut_messages(reader, key, [0, 1, 1000, n - 1]):
        p = tmp_path / f"cut{cut}.gguf"
        p.write_bytes(data[:cut])
        with pytest.raises(InputError) as e:
            read_kv(p)
        assert str(e.value) == f"{p}: {says}"
