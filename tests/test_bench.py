"""The C census loop of `make bench` agrees with the Python census, token for token counts; the
bench's parts of a census process add up to its wall; the fast walk of a GGUF's string arrays
names the same byte as the format's own reader where a file is cut."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import vocab
from gguf import GGUFReader

from llgbridge.analyses.census import compute as census
from llgbridge.errors import InputError
from llgbridge.gguf_meta import read_kv
from llgbridge.measure import bench, census_c, engines_cost, floor, loadtest, regen, scale, tests_time
from llgbridge.measure import native_split as NS
from llgbridge.measure.ablation import Ablation, Builds
from llgbridge.measure.audit_cost import AuditCost
from llgbridge.measure.benchmd import BenchPart, render, render_parts
from llgbridge.measure.census_c import Census, CensusRun, Line
from llgbridge.measure.corpus_time import CorpusTime
from llgbridge.measure.decode_time import Decode, Generation, MaskPath
from llgbridge.measure.inproc_split import InprocSplit
from llgbridge.measure.server_split import ServerSplit
from llgbridge.measure.whatif_time import Whatif, whatif_context
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
    from llgbridge.analyses.native import compute as native

    if native.unavailable():
        pytest.skip(native.unavailable())
    (row,) = NS.native_split(("bert-bge",))
    versions = native.built_versions()
    assert row["processes"] == len(versions)
    assert row["tests"] == 4 * len(versions) + len(native.PATCH_OF)
    assert row["test_own"] == 0 and row["test_work"] > 0
    assert abs(sum(row[k] for k, _ in NS.NATIVE_PARTS) - row["wall"]) < 1e-9
    page = render({"native_split": {"table": NS.native_split_table([row])}})
    assert page.startswith("## The native analysis in parts\n") and page.count("## ") == 1


def test_the_whatif_section_judges_each_what_if_against_issue_47s_goals() -> None:
    """The plain what-if's wall against 10 s, the overridden one's (both sides on one pool) against
    15 s, and a what-if with a failed run meets no goal however fast (hand-made rows: running three
    what-ifs is bench's job)."""
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

    override = "goal <= 15 s for the what-if with an override: not met (25.0 s, median of 1)"
    assert W.verdict(rows(9.96)) == f"goal <= 10 s for the plain what-if: met (10.0 s, median of 3); {override}"
    assert W.verdict(rows(10.6)) == f"goal <= 10 s for the plain what-if: not met (10.6 s, median of 3); {override}"
    assert W.verdict(rows(9.0, failed=1)).startswith("goal <= 10 s for the plain what-if: not met")
    page = render({"whatif": whatif_context(rows(9.96))})
    assert page.startswith("## A what-if, end to end\n") and page.count("## ") == 1
    assert "| plain | 9 | 0 | 10.0 | 23.2, 10.0, 15.1 |" in page and "met (10.0 s, median of 3)" in page


def test_the_server_split_counts_one_server_start_per_build() -> None:
    """`server_split` on llama-spm's synthetic model with two cases: one server start per build
    (each sampler on each llguidance version, and each candidate on the pin), not one per case;
    two requests on each (the cases) and the unconstrained baseline on the first only (it runs no
    grammar sampler); its parts add up to the wall."""
    from llgbridge.analyses.server import llama_server
    from llgbridge.measure import server_split as SS

    status, why = llama_server.built()
    if why:
        pytest.skip(why)
    (row,) = SS.server_split(("llama-spm",), ["forced_literal", "no_space"])
    builds = len(status["llguidance"]) * len(llama_server.SAMPLERS) + len(llama_server.CANDIDATE_BUILDS)
    assert (row["starts"], row["requests_n"]) == (builds, 2 * builds + 1)
    assert abs(sum(row[k] for k, _ in SS.SERVER_PARTS) - row["wall"]) < 1e-9
    assert row["requests"] > 0 and row["start"] > 0


def _hand_written_parts() -> list[BenchPart]:
    """A run's parts from values written here: two vocabs, one repetition a side, one serial
    regeneration, a load test; no mask path, decode, generation, corpus, split, floor, engines' cost
    or scale measured."""
    c = CensusRun(
        {"a": Line("a", 1000, 2, 1, 0.2, 0.1, 0.01), "b": Line("b", 3000, 0, 0, 0.4, 0.2, 0.02)}, 1.0, 0.8, 0.1
    )
    py = CensusRun(
        {"a": Line("a", 1000, 2, 1, 0.3, 0.1, 0.01), "b": Line("b", 3000, 0, 0, 0.5, 0.2, 0.02)}, 1.5, 1.2, 0.3
    )
    meta = {
        "machine": "m x86_64",
        "nproc": "2",
        "loadavg": "0.50 0.25 0.10",
        "repeat": "1",
        "code": "commit 0123456789ab",
        "python": "3.12.1",
    }
    census = Census([], [py], [c], 0.05, meta)
    runs = [{"notebook": "census", "wall": 10.0, "cells": 8.0, "analysis": 6.0}]
    load = [
        {
            **dict.fromkeys(loadtest.COLUMNS, 0),
            "model": "llama-spm",
            "llguidance": "1.0.1",
            "sampler": s,
            "rounds": 5,
            "requests": 32,
            "parallel": 4,
            "violations": v,
            "healthy_after": True,
        }
        for s, v in (("upstream", 7), ("fixed", 1))
    ]
    done: dict[str, BenchPart] = {
        "census": census,
        "ablation": Ablation([("one pass", 0.6)], census.c_work, census.total_tokens),
        "builds": Builds(
            {("a", "upstream"): 0.01, ("a", "fixed"): 0.02, ("b", "upstream"): 0.03, ("b", "fixed"): 0.06},
            {"b": 3000, "a": 1000},
        ),
        "regen": regen.Regens(
            {"regens": [regen.Regen("today", 1, 20.0, 0, runs)], "identity": {("today", 2): (120, [])}}
        ),
        "server_load": loadtest.ServerLoad(loadtest.LoadRun(5, load, [], ["qwen35: no server"])),
        "mask_path": MaskPath([]),
        "decode": Decode([]),
        "generation": Generation([]),
        "corpus_time": CorpusTime(None),
        "native_split": NS.NativeSplit([]),
        "server_split": ServerSplit([]),
        "inproc_split": InprocSplit({"rows": [], "cost": {"inside_us": 0.1, "all_us": 0.5}}),
        "whatif": Whatif(
            [
                {
                    "run": "plain",
                    "vocab": "llama-spm",
                    "wall": 16.04,
                    "walls": [23.2, 16.04, 15.1],
                    "analyses": 9,
                    "failed": 0,
                }
            ]
        ),
        # read back from a report's results: none here (their own tests below)
        "floor": floor.Floor(None),
        "engines_cost": engines_cost.EnginesCost(None),
        "scale": scale.Scale(None),
        "tests": tests_time.TestsTime(None),
        "audit": AuditCost(None),
    }
    return [done[k] for k in bench.CSV_ORDER]


def test_each_part_writes_its_own_section_of_bench_md_from_its_own_record(tmp_path: Path) -> None:
    """The template's sentences filled from a hand-written record, each part's section where it was
    measured and only there, bench.csv's rows in the parts' order, and the load test's failure
    said and failing the run."""
    parts = _hand_written_parts()
    bench.write_reports(tmp_path, parts)
    page = (tmp_path / "bench.md").read_text()
    for sentence in (
        "Machine: m x86_64, nproc 2, load average at start 0.50 0.25 0.10.\nVersions: python 3.12.1.\n"
        "The suite's code measured: commit 0123456789ab.\n",
        "**Overall (process wall, incl. interpreter start and imports): Python 1.50 s, C 1.00 s, ratio 1.50** "
        "(goal <= 1.3: NOT met; over the 1 repetitions, each Python run against the C run beside it: 1.50 to 1.50). "
        "Sum of per-vocab seconds: Python 0.80 s, C 0.60 s, ratio 1.33. "
        "Process CPU: Python 1.20 s, C 0.80 s, ratio 1.50.",
        "| (of which Python's checks before the load: read_kv + check_tokenizer, timed apart) | 0.050 |  |  |  |",
        "| **process wall** | 1.500 | 1.000 | +0.500 | 1.50 |",
        "| a | 1000 | 2 | 1 | 0.300 | 0.200 | 1.50 |",
        "| **all** | 4000 |  |  | 0.800 | 0.600 | 1.33 |",
        "against the C loop's non-load seconds (loop + free), 0.30 s.",
        "| one pass | 0.60 | 2.00 |",
        "| a | 1000 | 0.010 | 0.020 | 10.00 | 20.00 |\n| b | 3000 | 0.030 | 0.060 | 10.00 | 20.00 |",
        "(no real model fetched: run `make models`)",
        "5 rounds of concurrent requests",
        "In this run the fixed build broke its grammar on 1 request, and the judge and the server disagreed on "
        "0 answers, over 2 builds.",
        "Issue 47's goal <= 10 s for the plain what-if: not met (16.0 s, median of 3).",
        "| plain | 9 | 0 | 16.0 | 23.2, 16.0, 15.1 |",
        "Goals for *today*: serial at most 180 s, -j2 at most 120 s, overhead at most 25% of the wall.",
        "| today | -j1 | 1 | 20.0 | 6.0 | 14.0 | 70% |",
        "*today*, serial against -j2: 120 files of `reports/` compared",
        "all byte-identical.",
        "| census | 1 | 10.0 | 6.0 | 4.0 | 40% |",
    ):
        assert sentence in page, sentence
    heads = [row for row in page.splitlines() if row.startswith("#")]
    assert heads == [
        "# Census: Python vs C",
        "## What each optimisation bought",
        "## Building each bridge's tokenizer",
        "## The mask in a real decode step",
        "## llama-server under concurrent requests",
        "## A what-if, end to end",
        "## Regenerating the report",
    ]
    assert page.endswith("| census | 1 | 10.0 | 6.0 | 4.0 | 40% |\n")
    assert render_parts(parts[:1]) == page[: page.index("## What each")].rstrip("\n") + "\n"
    rows = (tmp_path / "bench.csv").read_text().splitlines()
    assert rows[0] == "benchmark,vocab,n_tokens,variant,seconds,ratio,us_per_token"
    assert "census_no_load,ALL,4000,one pass,0.6,2.0,150.0" in rows
    assert "bridge_build,b,3000,fixed,0.06,,20.0" in rows
    assert list(dict.fromkeys(r.split(",")[0] for r in rows[1:])) == [
        "census",
        "census_process_wall",
        "census_process_cpu",
        "census_part",
        "census_no_load",
        "bridge_build",
        "report_regeneration",
        "report_regeneration_part",
        "report_regeneration_analysis",
        "report_regeneration_identity",
        "whatif",
    ]
    assert (tmp_path / loadtest.SERVER_LOAD_MD).exists() and not (tmp_path / "bench-corpus-timing.json").exists()
    assert [line for p in parts for line in p.failures()] == ["load test: qwen35: no server"]
    assert [type(p).__name__ for p in parts if p.failed()] == ["ServerLoad"]


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
    assert {"llgbridge.analyses.census.compute", "llgbridge.vocab"} <= imported
    assert not imported & {
        "tqdm",
        "llgbridge.measure.bench",
        "llgbridge.measure.benchmd",
        "llgbridge.measure.census_c",
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


def _timing(
    results: Path, analysis: str, name: str, wall: float, compute: float, mtime: float = 1e9, load: float = 0.0
) -> None:
    """A run's timing file as run.Worker writes it, dated `mtime`."""
    p = results / ".timing" / analysis / f"{name}.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    timing = {"notebook": analysis, "vocab": name, "status": "ok", "wall": wall, "analysis": compute, "load": load}
    p.write_text(json.dumps(timing))
    os.utime(p, (mtime, mtime))


def _result(results: Path, analysis: str, name: str, record: dict[str, object]) -> None:
    p = results / analysis / f"{name}.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps({"status": "ok", "notebook": analysis, "vocab": name, **record}))


def test_the_scale_replays_batchs_schedule_worked_out_by_hand(tmp_path: Path) -> None:
    """Jobs in order to the worker free first. By hand, 5 4 3 3 2 1 on 2 workers: 5 and 4 start;
    3 goes to the second (free at 4, ends 7), 3 to the first (5, ends 8), 2 to the second (7, 9), 1 to
    the first (8, 9): 9. On 4: 5 4 3 3, then 2 to the third (free at 3, ends 5), 1 to the fourth
    (3, 4): 5, the longest job, as on 64."""
    assert scale.simulate([5, 4, 3, 3, 2, 1], 2) == 9
    assert scale.simulate([5, 4, 3, 3, 2, 1], 4) == 5
    assert scale.simulate([5, 4, 3, 3, 2, 1], 64) == 5
    # three inputs no fixture knows (no size: batch orders them by name): a = census 2 + leak 3,
    # b = census 4, c = leak 1. As inputs, on 2: a (5) and b (4), c to the second at 4: 5. Each run
    # its own job, largest first (4 3 2 1): 4 and 3, 2 to the second (3, ends 5), 1 to the first (4, 5): 5.
    for analysis, name, wall in (("census", "a", 2.0), ("leak", "a", 3.0), ("census", "b", 4.0), ("leak", "c", 1.0)):
        _timing(tmp_path, analysis, name, wall, wall)
    s = scale.scale(tmp_path)
    assert s is not None and s["check"] is None  # no pool.json
    assert [(w["workers"], w["inputs"], w["split"], w["even"]) for w in s["walls"]] == [
        (2, 5.0, 5.0, 5.0),
        (4, 5.0, 4.0, 2.5),
        (16, 5.0, 4.0, 0.625),
        (64, 5.0, 4.0, 0.15625),
    ]
    page = render_parts([scale.Scale(s)])
    assert (
        "The critical path is the longest input, a: 5.0 s (census 2.0, leak 3.0); from 2 workers on, it is the wall."
        in page
    )
    assert "longest single run (census on b, 4.0 s): 4.0 s on 64 workers, against 5.0 s" in page
    assert "| 4 | 5.0 | 4.0 | 2.5 |" in page


def test_the_floor_is_the_code_under_reviews_recorded_work_over_two_workers(tmp_path: Path) -> None:
    """A hand-written record: with no server split, llama-server's work is its generation, each
    answer's tokens over its own tok/s (4 / 2.0 = 2.0 s; an answer at 0 tok/s counts nothing);
    native's is its compute times the native split's floor share in bench.csv (the harness's
    setup, the tests and the walks: (1 + 3 + 2) / 10 = 60% of 8 s = 4.8 s; its port's builds are
    the suite's); the census records none. Floor (2 + 4.8) / 2 = 3.4 s; pool.json's wall 12 s:
    3.53 x the floor. With a server split (starts 5 and requests 75 of 100 s: 80%), the server's
    work is 80% of its 9.5 s of compute, 7.6 s."""
    _timing(tmp_path, "server", "x", 10.0, 9.5)
    _timing(tmp_path, "native", "x", 8.0, 8.0)
    _timing(tmp_path, "census", "x", 2.0, 1.5)
    _result(
        tmp_path,
        "server",
        "x",
        {
            "rows": [{}, {}],
            "tokens": [[1, 2, 3, 4], [5, 6]],
            "timing": {"constrained_tok_s": [{"tok_s": 2.0}, {"tok_s": 0.0}]},
        },
    )
    bench_csv = tmp_path / "bench.csv"
    bench_csv.write_text(
        "benchmark,vocab,n_tokens,variant,seconds,ratio,us_per_token\n"
        "native_part,v,1,wall,10,,1\nnative_part,v,1,test_work,3,,1\nnative_part,v,1,harness_work,2,,1\n"
        "native_part,v,1,harness_setup,1,,1\nnative_part,v,1,bridges,4,,1\nserver_part,m,1,requests,99,,1\n"
    )
    (tmp_path / ".timing" / "pool.json").write_text(json.dumps({"wall": 12.0, "runs": 3}))
    f = floor.floor(tmp_path, bench_csv)
    page = render_parts([floor.Floor(f)])
    for line in (
        "| census | 1 | 2.0 | 0.0 | 0.0 | 1.5 | 0.5 | 100% | its compute: not recorded, counted as the suite's |",
        "| native | 1 | 8.0 | 4.8 | 0.0 | 3.2 | 0.0 | 40% | compute x 60%: the native split's floor share (bench.csv)",
        "| server | 1 | 10.0 | 2.0 | 0.0 | 7.5 | 0.5 | 80% | llama-server's generation, its own timings (result) |",
        "| **all** | 3 | 20.0 | 6.8 | 0.0 | 12.2 | 1.0 | 66% |  |",
        "| make report's pool, measured (pool.json; every run) | 3 | 12.0 | 3.4 | 3.53 | 9.5 | 1.26 |",
    ):
        assert line in page, line
    assert "batch's schedule on 2 workers (scale) |" not in page
    # a later make report that reran only the server: pool.json counts its one run, dated inside its wall
    (tmp_path / ".timing" / "pool.json").write_text(json.dumps({"wall": 11.0, "runs": 1}))
    os.utime(tmp_path / ".timing" / "pool.json", (2e9, 2e9))
    _timing(tmp_path, "server", "x", 10.0, 9.5, mtime=2e9 - 1)
    page = render_parts([floor.Floor(floor.floor(tmp_path, bench_csv))])
    assert (
        "| make report's pool, measured (pool.json; only its runs: server) | 1 | 11.0 | 1.0 | 11.00 | 4.8 | 2.32 |"
        in page
    )
    # every run: one input, one job of 20 s on either worker; floor 3.4
    assert "| every recorded run, batch's schedule on 2 workers (scale) | 3 | 20.0 | 3.4 | 5.88 | 9.5 | 2.11 |" in page
    bench_csv.write_text(
        bench_csv.read_text().replace("server_part,m,1,requests,99,,1\n", "")
        + "server_part,m,1,wall,100,,1\nserver_part,m,1,start,5,,1\nserver_part,m,1,requests,75,,1\n"
    )
    page = render_parts([floor.Floor(floor.floor(tmp_path, bench_csv))])
    server_line = "| server | 1 | 10.0 | 7.6 | 0.0 | 1.9 | 0.5 | 24% | compute x 80%: the server split's floor share"
    assert server_line in page


def test_an_in_process_analysis_takes_its_splits_native_share_and_its_vocab_load(tmp_path: Path) -> None:
    """A hand-written record: leak's run, 3.0 s of wall, 2.0 of compute, 0.5 its vocab's load in the
    kernel. With no split, only the load is the code under review's (0.5 s; the suite's compute
    2.0, its overhead 3.0 - 2.0 - 0.5 = 0.5, share 83%). With the in-process split's llguidance 1 s
    and llama.cpp 1 s of 4 s (50%; its Python's 2 s are not): 2.0 x 50% + 0.5 = 1.5 s, the suite's
    compute 1.0, share 50%."""
    _timing(tmp_path, "leak", "x", 3.0, 2.0, load=0.5)
    bench_csv = tmp_path / "bench.csv"
    bench_csv.write_text("benchmark,vocab,n_tokens,variant,seconds,ratio,us_per_token\n")
    page = render_parts([floor.Floor(floor.floor(tmp_path, bench_csv))])
    assert "| leak | 1 | 3.0 | 0.5 | 0.5 | 2.0 | 0.5 | 83% | its compute: not recorded, counted as the suite's" in page
    bench_csv.write_text(
        bench_csv.read_text()
        + "inproc_leak,v,1,wall,4,,1\ninproc_leak,v,1,llguidance,1,,1\ninproc_leak,v,1,llama_cpp,1,,1\n"
        + "inproc_leak,v,1,python,2,,1\n"
    )
    page = render_parts([floor.Floor(floor.floor(tmp_path, bench_csv))])
    line = "| leak | 1 | 3.0 | 1.5 | 0.5 | 1.0 | 0.5 | 50% | compute x 50%: the in-process split's floor share"
    assert line in page


def test_a_call_inside_another_counts_as_its_own_not_the_outers() -> None:
    """By hand: llguidance's call takes 0.2 s of its own and calls back into llama.cpp for 0.1 s
    (as its tokenize callback does): llguidance 0.2, llama.cpp 0.1, never 0.3 for the outer."""
    from llgbridge.measure.inproc_split import CallClock

    clock = CallClock()
    inner = clock.timed("llama_cpp", lambda: time.sleep(0.1))

    def outer_work() -> None:
        time.sleep(0.2)
        inner()

    clock.timed("llguidance", outer_work)()
    assert abs(clock.seconds["llguidance"] - 0.2) < 0.05 and abs(clock.seconds["llama_cpp"] - 0.1) < 0.05
    assert clock.calls == {"llguidance": 1, "llama_cpp": 1}


def test_the_native_split_keeps_each_calls_own_seconds_by_the_one_timer() -> None:
    """By hand, as `native.analyse` nests them: bug C's rows take 0.1 s of their own and run the
    harness for 0.2 s inside, which is counted as bug C's ("special"), its own 0.2 s; the native
    split and the in-process clock share `calls.SelfTimer`, and a block that raises puts every
    function back."""
    from llgbridge.measure import calls
    from llgbridge.measure.native_split import CallLog

    log = CallLog()
    harness = log.timed("harness", lambda sampler: time.sleep(0.2))

    def rows() -> None:
        time.sleep(0.1)
        harness("upstream")

    log.timed("special", rows)()
    # the inner call ends first
    assert [(c.part, c.samplers, round(c.seconds, 1)) for c in log.calls] == [
        ("special", ("upstream",), 0.2),
        ("special", (), 0.1),
    ], log.calls

    class Target:
        f = staticmethod(abs)

    with pytest.raises(ZeroDivisionError), calls.timing(calls.SelfTimer(lambda *a: None), [(Target, "f", "x")]):
        assert Target.f is not abs
        _ = 1 / 0
    assert Target.f is abs


def test_the_clock_times_a_real_bridge_builds_native_calls_and_puts_every_function_back() -> None:
    """A bridge build on llama-spm under the clock: llguidance's tokenizer is built (at least one
    llguidance call) from every token's piece, read through llama.cpp (at least one call per token
    of the vocab); after the block, every function is the one it was before."""
    import llama_cpp

    from llgbridge import bridges, llg
    from llgbridge.measure.inproc_split import CallClock, clocked
    from llgbridge.vocab import _call

    before = (llg.lib.llg_new_tokenizer, llama_cpp.llama_tokenize, _call.token_to_piece)
    v = vocab("llama-spm")
    clock = CallClock()
    with clocked(clock):
        bridges.make_bridge(v, "fixed")
    assert clock.calls["llguidance"] >= 1 and clock.calls["llama_cpp"] >= v.n_tokens, clock.calls
    assert clock.seconds["llguidance"] > 0 and clock.seconds["llama_cpp"] > 0
    assert (llg.lib.llg_new_tokenizer, llama_cpp.llama_tokenize, _call.token_to_piece) == before


def test_the_engines_cost_sums_each_engines_recorded_seconds(tmp_path: Path) -> None:
    """Two hand-written results: lm-format-enforcer 1.5 + 2.0 s, outlines 0.5 s on a and an error on
    b; the engines runs' walls (3 + 4 s) against the census's 10 s: +70%; a what-if's engines run on
    llama-spm, 2.5 s: within issue 46's 3 s."""
    results, whatifs = tmp_path / "results", tmp_path / "whatif"
    _result(results, "engines", "a", {"rows": [], "seconds": {"outlines": 0.5, "lm-format-enforcer": 1.5}})
    _result(
        results,
        "engines",
        "b",
        {
            "rows": [{"engine": "lm-format-enforcer"}, {"engine": "outlines", "error": "x"}],
            "seconds": {"lm-format-enforcer": 2.0},
        },
    )
    for name, wall in (("a", 3.0), ("b", 4.0)):
        _timing(results, "engines", name, wall, wall - 0.5)
    _timing(results, "census", "a", 10.0, 8.0)
    _result(whatifs / "mine" / "results", "engines", "llama-spm", {"seconds": {"lm-format-enforcer": 1.25}})
    _timing(whatifs / "mine" / "results", "engines", "llama-spm", 2.5, 2.0)
    c = engines_cost.engines_cost(results, whatifs)
    page = render_parts([engines_cost.EnginesCost(c)])
    for line in (
        "summed over its 2 runs, 4.0 s of the analysis's 6.0 s compute and 7.0 s wall",
        "| lm-format-enforcer | 2 | 3.5 | 1.75 | 2.00 (b) |  |",
        "| outlines | 1 | 0.5 | 0.50 | 0.50 (a) | b |",
        "the engines runs' wall, 7.0 s, is +70% of every other analysis's runs' wall (10.0 s; +75% of their compute), "
        "3.5 s of wall on 2 workers. Issue 46's goal, at most +15%: not met (70%).",
        "at most 3 s in a what-if on llama-spm: met (2.5 s).",
        "| mine | llama-spm | 2.50 | 1.25 | 0.00 |",
    ):
        assert line in page, line
    rows = engines_cost.EnginesCost(c).rows()
    assert [(r["vocab"], r["variant"], r["seconds"]) for r in rows][:3] == [
        ("lm-format-enforcer", "seconds", 3.5),
        ("outlines", "seconds", 0.5),
        ("ALL", "analysis_wall", 7.0),
    ]


def test_the_engines_parts_set_each_mask_beside_llguidances() -> None:
    """Hand-written parts (no timing measured here): outlines' mask 4 ms against llguidance's 0.5 ms
    on llama-bpe reads 8x, in the page and in bench.csv; an engine that failed is its one line."""
    rows = (
        {"vocab": "llama-bpe", "engine": "llguidance", "error": "", "import": 0.1, "load": 1.0, "table": 2.0}
        | {"compile": 0.001, "mask": 0.0005, "step": 0.0004},
        {"vocab": "llama-bpe", "engine": "outlines", "error": "", "import": 0.5, "load": 1.0, "table": 1.5}
        | {"compile": 0.09, "mask": 0.004, "step": 0.003},
        {"vocab": "gemma-4", "engine": "lm-format-enforcer", "error": "no answer within the 300 s limit: stopped"},
    )
    part = engines_cost.EnginesCost(None, rows)
    page = render_parts([part])
    assert "| llama-bpe | llguidance | 0.10 | 1.00 | 2.00 | 1.00 | 0.50 | 0.40 | 1x |  |" in page
    assert "| llama-bpe | outlines | 0.50 | 1.00 | 1.50 | 90.00 | 4.00 | 3.00 | 8x |  |" in page
    assert (
        "| gemma-4 | lm-format-enforcer | - | - | - | - | - | - | - | no answer within the 300 s limit: stopped |"
        in page
    )
    got = {(r["vocab"], r["variant"]): (r["seconds"], r["ratio"]) for r in part.rows()}
    assert got[("llama-bpe", "outlines:mask")] == (0.004, 8.0)
    assert got[("llama-bpe", "outlines:table")] == (1.5, 0.75)
    assert part.failures() == [
        "engines_parts: lm-format-enforcer on gemma-4: no answer within the 300 s limit: stopped"
    ]


def test_the_engines_step_token_is_two_lowercase_letters() -> None:
    """By hand: llama-bpe (Llama 3's tokenizer) has the 256 byte tokens, then '  ' (256), '    '
    (257) and 'in' (258); gemma-4's first two-letter piece is 'in' too."""
    from llgbridge.analyses.engines.compute import load_llama
    from llgbridge.paths import vocab_path

    for name, want in (("llama-bpe", 258), ("gemma-4", 495)):
        llm = load_llama(str(vocab_path(name)), ())
        assert engines_cost.step_token(llm) == want
        assert llm.detokenize([want]) == b"in"


def test_the_tests_time_is_read_from_pytests_own_summary(tmp_path: Path) -> None:
    """A real pytest run of four hand-written tests (two pass, one is skipped, one fails after a
    0.3 s sleep): the counts, the seconds and the slowest test are pytest's own, and the part
    fails the bench run on pytest's exit."""
    (tmp_path / "test_four.py").write_text(
        "import time, pytest\n"
        "def test_a(): pass\n"
        "def test_b(): pass\n"
        "@pytest.mark.skip(reason='x')\ndef test_c(): pass\n"
        "def test_d():\n    time.sleep(0.3)\n    assert False\n"
    )
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=2", "test_four.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    got = tests_time.parse(r.stdout)
    assert got["counts"] == {"passed": 2, "skipped": 1, "failed": 1}, r.stdout
    said = re.search(r" in ([\d.]+)s", r.stdout.strip().splitlines()[-1])
    assert said and got["seconds"] == float(said[1])
    assert got["slowest"][0]["test"] == "test_four.py::test_d" and got["slowest"][0]["s"] >= 0.3
    part = tests_time.TestsTime({**got, "wall": 1.0, "exit": r.returncode})
    assert part.failures() == ["the tests' time: pytest exited 1"]
    page = render_parts([part])
    assert f"at most 180 s on 2 cores: not met ({got['seconds']:.1f} s; pytest exited 1)." in page
    assert "| `test_four.py::test_d` | call |" in page
    stopped = tests_time.TestsTime({"error": "pytest printed no summary line (exit 4): x", "wall": 1.0})
    assert "not measured: pytest printed no summary line (exit 4): x" in render_parts([stopped])
    with pytest.raises(ValueError, match="no summary line"):
        tests_time.parse("ImportError while loading conftest")


def test_the_inproc_split_leaves_the_bench_process_as_it_was() -> None:
    """The split runs the notebooks in an IPython shell, which puts its own module in place of
    `__main__` (and its display hook): run in the bench's process, multiprocessing's spawn then
    failed on `__main__.__spec__` in the what-if that follows. Its rows still come back."""
    import multiprocessing

    from llgbridge.measure.inproc_split import inproc_split

    main, hook = sys.modules["__main__"], sys.displayhook
    got = inproc_split(("llama-spm",))
    assert sys.modules["__main__"] is main and sys.displayhook is hook
    assert {r["analysis"] for r in got["rows"]} == {"census", "leak", "forced", "probe", "exactness", "soundness"}
    assert all(not r["error"] for r in got["rows"]), got["rows"]
    leak = next(r for r in got["rows"] if r["analysis"] == "leak")
    assert leak["llguidance"] > 0 and leak["calls"] >= 32000  # llama-spm's 32,000 pieces, read for a bridge
    with multiprocessing.get_context("spawn").Pool(1) as p:
        assert p.apply(abs, (-3,)) == 3


def test_the_floor_counts_the_other_engines_own_seconds_as_code_under_review(tmp_path: Path) -> None:
    """Issue 60: the engines' own work is in the floor. By hand: an engines run of 3.5 s wall, 3.0 s
    compute, whose result records lm-format-enforcer 1.5 s and outlines 0.5 s: 2.0 s theirs, the
    suite's compute 1.0, overhead 0.5, share 1.5 / 3.5 = 43%; an engines_e2e run of 4.0 s wall,
    3.5 s compute, outlines 1.0 s and llama.cpp GBNF 2.0 s on one model: 3.0 s, share 1.0 / 4.0 = 25%."""
    _timing(tmp_path, "engines", "x", 3.5, 3.0)
    _result(tmp_path, "engines", "x", {"rows": [], "seconds": {"lm-format-enforcer": 1.5, "outlines": 0.5}})
    _timing(tmp_path, "engines_e2e", "x", 4.0, 3.5)
    _result(tmp_path, "engines_e2e", "x", {"rows": [], "seconds": {"m.gguf": {"outlines": 1.0, "llama.cpp GBNF": 2.0}}})
    bench_csv = tmp_path / "bench.csv"
    bench_csv.write_text("benchmark,vocab,n_tokens,variant,seconds,ratio,us_per_token\n")
    page = render_parts([floor.Floor(floor.floor(tmp_path, bench_csv))])
    assert "| engines | 1 | 3.5 | 2.0 | 0.0 | 1.0 | 0.5 | 43% | each engine's own seconds (result) |" in page
    assert (
        "| engines_e2e | 1 | 4.0 | 3.0 | 0.0 | 0.5 | 0.5 | 25% | each engine's own generation seconds (result) |"
        in page
    )


def test_the_audits_cost_is_its_wall_against_the_code_under_reviews_work_by_hand() -> None:
    """By hand: 3 files whose analyses' runs took 4, 2 and 6 s on 2 workers (6 s over them), in
    which the code under review worked 10 s (5 s over them): a wall of 7.5 s is 1.50 x the floor
    (issue 60's 1.25: not met) and (7.5 - 6) / 3 = 0.50 s a file beyond its analyses (met)."""
    files = [
        {"file": "a.gguf", "n_tokens": 1000, "seconds": 4.0},
        {"file": "b.gguf", "n_tokens": 2000, "seconds": 2.0},
        {"file": "c.gguf", "n_tokens": 3000, "seconds": 6.0},
    ]
    page = render_parts([AuditCost({"wall": 7.5, "workers": 2, "n": 3, "files": files, "review": 10.0, "failed": []})])
    assert "10.0 s over the workers, 5.0 s; the wall is 1.50 x that floor" in page
    assert "took 12.0 s on the workers, 6.0 s over them (the wall is 1.25 x that)" in page
    assert "the wall within 1.25 x the floor, not met (1.50 against 1.25)" in page
    assert "at most 1 s a file beyond its analyses, met (0.50 s against 1.0 s)" in page
    assert "| c.gguf | 3,000 | 6.0 | 2000 |" in page


def test_the_audits_floor_counts_a_run_as_the_reports_floor_does(tmp_path: Path) -> None:
    """By hand, two what-ifs' results under one audit: a matrix run whose generation took 1.5 s and
    whose vocab load 0.25 s (1.75 s of the code under review's), and a leak run whose compute of
    2 s the in-process split found 40% llama.cpp's and llguidance's, with a load of 0.5 s (1.3 s)."""
    from llgbridge.measure.audit_cost import under_review

    def put(path: Path, body: dict[str, Any]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(body), encoding="utf-8")

    a, b = tmp_path / "files" / "k1" / "results", tmp_path / "files" / "k2" / "results"
    put(
        a / ".timing" / "matrix" / "m.json",
        {"notebook": "matrix", "vocab": "m", "wall": 4, "analysis": 3, "load": 0.25},
    )
    put(a / "matrix" / "m.json", {"status": "ok", "timing": [{"seconds": 1.0}, {"seconds": 0.5}]})
    put(b / ".timing" / "leak" / "l.json", {"notebook": "leak", "vocab": "l", "wall": 3, "analysis": 2, "load": 0.5})
    split = [
        {"benchmark": "inproc_leak", "variant": "wall", "seconds": "10"},
        *({"benchmark": "inproc_leak", "variant": k, "seconds": "2"} for k in floor.SPLIT_FLOOR["leak"][:2]),
    ]
    assert len(floor.SPLIT_FLOOR["leak"]) >= 2
    assert under_review(tmp_path, split) == pytest.approx(1.75 + 0.4 * 2 + 0.5)


def test_a_flipped_copy_differs_from_its_fixture_in_add_space_prefix_alone(tmp_path: Path) -> None:
    """The audit's variants, read back with gguf-py's own reader: llama-spm's copy has
    add_space_prefix the other way round, the same tokens, and a sha256 of its own."""
    import hashlib

    import gguf

    from llgbridge.measure.audit_cost import flipped
    from llgbridge.paths import VOCABS

    src = VOCABS / "ggml-vocab-llama-spm.gguf"
    dest = flipped(src, tmp_path / "spm-flipped.gguf")
    a, b = gguf.GGUFReader(str(src)), gguf.GGUFReader(str(dest))

    def prefix(r: gguf.GGUFReader) -> bool | None:
        f = r.fields.get("tokenizer.ggml.add_space_prefix")
        return bool(f.parts[f.data[0]][0]) if f else None

    assert prefix(b) is (not prefix(a) if prefix(a) is not None else True)
    tokens = "tokenizer.ggml.tokens"
    assert [bytes(a.fields[tokens].parts[i]) for i in a.fields[tokens].data] == [
        bytes(b.fields[tokens].parts[i]) for i in b.fields[tokens].data
    ]
    assert hashlib.sha256(src.read_bytes()).digest() != hashlib.sha256(dest.read_bytes()).digest()


def test_only_prints_its_section_alone_on_stdout(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """`--only`'s stdout is bench.md's section: what the part printed while it ran, and what a
    process it started printed (as the audit's what-ifs print "report written to"), go to stderr."""
    parts = _hand_written_parts()

    def noisy(_o: bench.Options) -> list[BenchPart]:
        print("report written to somewhere")
        subprocess.run([sys.executable, "-c", "print('a child says so')"], check=True)
        return parts[:1]

    monkeypatch.setitem(bench.ONLY, "census", noisy)
    assert bench.main(["--only", "census"]) == 0
    out, err = capfd.readouterr()
    assert out == render_parts(parts[:1])
    assert "report written to somewhere" in err and "a child says so" in err


def test_a_part_measured_again_replaces_only_its_rows_and_sections(tmp_path: Path) -> None:
    """`--only engines --splice` after a full run: the engines' rows of bench.csv and their two
    sections of bench.md are the new measurement's, each section saying at which code; every
    other row and section is byte for byte the full run's."""

    def cost(seconds: float) -> dict[str, Any] | None:
        results = tmp_path / f"results-{seconds}"
        _result(results, "engines", "a", {"rows": [], "seconds": {"outlines": seconds}})
        _timing(results, "engines", "a", 3.0, 2.5)
        _timing(results, "census", "a", 10.0, 8.0)
        return engines_cost.engines_cost(results, tmp_path / "no-whatifs")

    full = [
        p if not isinstance(p, engines_cost.EnginesCost) else engines_cost.EnginesCost(cost(3.0))
        for p in _hand_written_parts()
    ]
    bench.write_reports(tmp_path, full)
    before_md, before_csv = (tmp_path / "bench.md").read_text(), (tmp_path / "bench.csv").read_text()
    rows = (
        {"vocab": "llama-bpe", "engine": "llguidance", "error": "", "import": 0.1, "load": 1.0, "table": 2.0}
        | {"compile": 0.001, "mask": 0.0005, "step": 0.0004},
    )
    bench.splice(tmp_path, "engines", [engines_cost.EnginesCost(cost(7.0), rows)], "commit 0123456789ab")
    md, csv_now = (tmp_path / "bench.md").read_text(), (tmp_path / "bench.csv").read_text()
    said = "*Measured again alone at commit 0123456789ab (`python -m llgbridge.measure.bench --only engines --splice`)"
    assert md.count(said) == 2
    assert "| llama-bpe | llguidance | 0.10 | 1.00 | 2.00 | 1.00 | 0.50 | 0.40 | 1x |  |" in md
    assert "engines_cost,outlines,1,seconds,7.0" in csv_now and "engines_cost,outlines,1,seconds,3.0" in before_csv
    assert "engines_parts,llama-bpe,1,llguidance:mask" in csv_now

    def others(text: str) -> list[str]:
        ours = ("## The other engines' cost", "## What a user picking an engine pays")
        return [x for x in re.split(r"(?m)^(?=## )", text) if not x.startswith(ours)]

    assert others(md) == others(before_md)
    assert [ln for ln in csv_now.splitlines() if not ln.startswith("engines_")] == [
        ln for ln in before_csv.splitlines() if not ln.startswith("engines_")
    ]
