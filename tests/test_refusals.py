"""Issue 58, breaks 8 and 9: what a user gives that the suite cannot take is one line naming it and
the cause, and a non-zero exit, from every command that reads it; never a traceback, never a run
that writes where it should not or silently does nothing.

- an outside analysis named in `LLGBRIDGE_ANALYSES` (tests/toy_analysis/ is a good one, copied and
  spoiled here one way at a time): a package that is not there, one that raises on import, one
  with no entry, one whose name another analysis has, one named `../..` (its results went outside
  the results folder), one whose `runs_on` is misspelled (it silently never ran);
- a Dask scheduler address (`--cluster`, `make report CLUSTER=`) without a port or of a scheme the
  suite cannot reach a scheduler by;
- a loop of symbolic links given to `make whatif`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import CENSUS_ONLY, census_needs_no_models

from llgbridge.measure import regen
from llgbridge.paths import ROOT

TOY = Path(__file__).with_name("toy_analysis")
ENTRY = "LLGBRIDGE_ANALYSES"


def _spoiled(pkgs: Path, name: str, change: tuple[str, str] | None = None, init: str | None = None) -> None:
    """tests/toy_analysis/ copied as the package `name`, its entry's text changed (`change`) or its
    `__init__.py` replaced (`init`)."""
    shutil.copytree(TOY, pkgs / name)
    entry = pkgs / name / "__init__.py"
    if init is not None:
        entry.write_text(init)
    if change is not None:
        text = entry.read_text()
        assert change[0] in text
        entry.write_text(text.replace(*change))


# each spoiled entry: how it is made, and the words its one line must hold after its package's name
BAD: dict[str, tuple[dict[str, object], str]] = {
    "toy_absent": ({}, "toy_absent: no such package on the Python path"),
    "toy_raises": ({"init": "raise RuntimeError('the entry module broke')\n"}, "toy_raises: importing it raised "),
    "toy_no_entry": ({"init": "X = 1\n"}, "toy_no_entry: no ANALYSIS entry"),
    "toy_twin": ({"change": ('"toy",', '"census",')}, "toy_twin: its analysis is named 'census', as "),
    "toy_climbs": ({"change": ('"toy",', '"../../escaped",')}, "toy_climbs: name '../../escaped' is not an analysis"),
    "toy_misspelt": ({"change": ('runs_on="every"', 'runs_on="evrey"')}, "toy_misspelt: toy: runs_on 'evrey' is no"),
}


@pytest.fixture(scope="module")
def pkgs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pkgs")
    for name, (how, _) in BAD.items():
        if name != "toy_absent":
            _spoiled(folder, name, **how)  # type: ignore[arg-type]
    return folder


def _env(pkgs: Path, entry: str, lib: Path = ROOT / "lib") -> dict[str, str]:
    drop = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", ENTRY}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return {**env, ENTRY: entry, "PYTHONPATH": os.pathsep.join([str(pkgs), str(lib)])}


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The command's one line on stderr (Make's own 'Error' line aside), from a non-zero exit."""
    lines = [ln for ln in done.stderr.splitlines() if not ln.startswith("make: ***")]
    assert done.returncode != 0 and len(lines) == 1, (done.returncode, done.stderr[-3000:])
    return lines[0]


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_outside_analysis_is_one_line_and_nothing_runs(pkgs: Path, name: str, tmp_path: Path) -> None:
    """The pool's own command (what `make report` runs) on a real fixture: each spoiled entry is
    refused in one line naming the variable, the package and the cause, exit 2, before anything
    ran. Before, four were tracebacks, the one named `../../escaped` wrote its result two folders
    above the results, and the misspelt `runs_on` ran nothing and exited 0."""
    results = tmp_path / "a" / "b" / "results"
    done = subprocess.run(
        [sys.executable, "-m", "llgbridge.batch", "--inputs", "every=llama-spm", "--results", str(results)],
        cwd=ROOT,
        env=_env(pkgs, name),
        capture_output=True,
        text=True,
        timeout=300,
    )
    line = _one_line(done)
    assert done.returncode == 2 and line.startswith(f"{ENTRY}: {BAD[name][1]}"), line
    assert "Traceback" not in done.stderr and not (tmp_path / "a").exists() and not (ROOT / "escaped").exists()


# every command that reads the registry, as the Makefile and the README run them (`-h`: were the
# refusal missing, each would only print its usage)
COMMANDS = [
    "llgbridge.run",
    "llgbridge.batch",
    "llgbridge.whatif",
    "llgbridge.report",
    "llgbridge.inputsets",
    "llgbridge.analyses.native",
    "llgbridge.analyses.server.llama_server",
    "llgbridge.analyses.corpus.compute",
]


def test_every_command_says_the_same_one_line(pkgs: Path) -> None:
    for module in COMMANDS:
        done = subprocess.run(
            [sys.executable, "-m", module, "-h"],
            cwd=ROOT,
            env=_env(pkgs, "toy_raises"),
            capture_output=True,
            text=True,
            timeout=300,
        )
        line = _one_line(done)
        assert line.startswith(f"{ENTRY}: toy_raises: importing it raised RuntimeError: the entry module broke"), (
            module,
            line,
        )


def test_make_report_says_it_in_one_line(pkgs: Path, tmp_path: Path) -> None:
    """`make report` itself, in a copy of the tree (the census alone, were the refusal missing)."""
    tree = regen.tree_copy(tmp_path)
    for shared in ("models", "native", "schemas"):  # links to the real data/: this copy writes none of it
        (tree / "data" / shared).unlink(missing_ok=True)
    for built in ("native", "native/server"):  # the census needs neither
        (tree / "data" / built).mkdir(parents=True)
        (tree / "data" / built / ".built").touch()
    census_needs_no_models(tree)
    done = subprocess.run(
        ["make", "-s", "report", *CENSUS_ONLY],
        cwd=tree,
        env=_env(pkgs, "toy_twin", tree / "lib"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    line = _one_line(done)
    assert line.startswith(f"{ENTRY}: toy_twin: its analysis is named 'census'"), line
    assert not (tree / "data" / "results").exists()


@pytest.mark.parametrize(
    ("address", "cause"),
    [
        ("foo", "no port"),
        ("http://127.0.0.1:8786", "the scheme 'http://' is not one"),
        ("ucx://127.0.0.1:8786", "the scheme 'ucx://' is not one"),
        ("tcp://127.0.0.1:port", "the port 'port' is no port number"),
    ],
)
def test_a_cluster_address_dask_cannot_reach_is_one_line(
    address: str, cause: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`make report CLUSTER=foo` (`batch --cluster`) was Dask's traceback (a missing port, an
    unknown scheme, UCX's abstract connector); `make corpus CLUSTER=` the same. Each is refused in
    one line naming the address and the cause, exit 2, before any plan or run."""
    from llgbridge import batch
    from llgbridge.analyses.corpus import compute as corpus

    for main, argv, where in (
        (batch.main, ["--inputs", "every=llama-spm", "--results", str(tmp_path / "r")], "make report"),
        (
            corpus.main,
            ["--vocabs", "llama-spm", "--out", str(tmp_path / "c"), "--cache", str(tmp_path / "c")],
            "make corpus",
        ),
    ):
        assert main([*argv, "--cluster", address]) == 2
        said = capsys.readouterr()
        assert said.out == "" and said.err.startswith(f"--cluster {address!r} ({where} CLUSTER=...): {cause}"), said
        assert said.err.count("\n") == 1, said.err
        assert not (tmp_path / "r").exists() and not (tmp_path / "c").exists()


@pytest.mark.parametrize("links", [["loop.gguf"], ["a.gguf", "b.gguf"]])
def test_a_loop_of_links_given_to_whatif_is_one_line(links: list[str], tmp_path: Path) -> None:
    """A link to itself, and two links to each other: `make whatif VOCAB=` was a 38-line traceback
    (pathlib's "Symlink loop" raised while the refusal named the file)."""
    for here, there in zip(links, links[1:] + links[:1]):
        (tmp_path / here).symlink_to(tmp_path / there)
    given = tmp_path / links[0]
    done = subprocess.run(
        [sys.executable, "-m", "llgbridge.whatif", "--", str(given)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    line = _one_line(done)
    assert done.returncode == 2 and line == f"whatif: {given}: a loop of symbolic links: it names no file", line


def test_a_port_that_is_no_dask_scheduler_is_one_line_within_the_wait(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`CLUSTER=` at an HTTP server on loopback: it accepts the connection and never answers Dask's
    handshake, and the client waited past 400 s, also with `--cluster-wait 5`. Now one line naming
    the address, exit 1, nothing written, within the wait and a few seconds."""
    import http.server
    import threading
    import time

    from llgbridge import batch

    class Quiet(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # the server's own log is not the suite's line
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)  # its handler threads are daemons
    threading.Thread(target=server.serve_forever, daemon=True).start()
    address = f"tcp://127.0.0.1:{server.server_address[1]}"
    try:
        t0 = time.monotonic()
        argv = ["--inputs", "every=llama-spm", "--results", str(tmp_path / "r"), "--cluster-wait", "2"]
        code = batch.main([*argv, "--cluster", address])
        took = time.monotonic() - t0
    finally:
        server.shutdown()
    said = capsys.readouterr()
    assert code == 1, said
    assert took < 30, f"took {took:.0f} s"
    lines = [x for x in said.err.splitlines() if x.strip()]
    assert len(lines) == 1 and address in lines[0] and "Traceback" not in said.out, said.err
    assert not (tmp_path / "r").exists()


def test_a_result_a_worker_made_with_other_code_is_refused_in_one_line(tmp_path: Path) -> None:
    """Workers started from another checkout (or before an edit): every run said "ok", then the
    render failed "stale result: its code changed", and each rerun looped the same way, nothing
    naming the cause. The client now refuses such a result in one line naming it, and writes a
    failed result in its place (the next run runs it again); a result of its own code it writes as
    before."""
    import json as _json

    from llgbridge import remote
    from llgbridge.results import code_version

    said: list[str] = []
    client = remote.Client(None, tmp_path / "results", tmp_path / "out", said.append, 1.0)
    mine, theirs = code_version("census"), "0" * 16
    value = {
        "statuses": [
            {"notebook": "census", "vocab": "a", "status": "ok", "seconds": 1.0},
            {"notebook": "leak", "vocab": "a", "status": "ok", "seconds": 1.0},
        ],
        "results": {
            "census/a.json": _json.dumps({"provenance": {"code": mine}}).encode(),
            "leak/a.json": _json.dumps({"provenance": {"code": theirs}}).encode(),
        },
        "reports": {},
    }
    client.write(value)
    got = {st["notebook"]: st for st in client.outcome.statuses}
    assert got["census"]["status"] == "ok", got["census"].get("error")
    assert (tmp_path / "results" / "census" / "a.json").exists()
    assert got["leak"]["status"] == "failed"
    written = _json.loads((tmp_path / "results" / "leak" / "a.json").read_text())
    assert written["status"] == "failed"
    assert "other code" in got["leak"]["error"] and theirs in got["leak"]["error"]
    assert "\n" not in got["leak"]["error"]
