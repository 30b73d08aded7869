"""`make audit MODELS="dir/ a.gguf ..."`: the what-if's answer for every GGUF file given, on one page.

    python -m llgbridge.audit [--name NAME] [--override KEY=TYPE:VALUE ...] [--max-mb MB] [--server]
                              [--analyses "census leak"] [--cluster tcp://host:8786] PATH ...

Every `*.gguf` under a folder given (sorted, its subfolders too) and every file given is checked at
the edge as `make whatif` checks its file (a GGUF, a tokenizer header that reads): a bad one is one
line naming it and the cause, and the others go on. Each good one is a what-if of its own
(`whatif.whatif`, its page under `reports/audit/NAME/files/KEY/`): the vocab analyses load only its
vocab (llama.cpp's vocab-only load: no weight is read), and the matrix and the real llama-server
run on the file's own weights where it has weights and is under `--max-mb` (`MAX_MB`), or on every
file with weights with `--server` (`SERVER=1`); elsewhere on a random-weight stand-in around its
tokenizer, which the summary's cell says.

A file is keyed by its sha256, the overrides, whether the server ran on its weights and the
analyses asked for (`key`): a second audit runs only the keys it has no answer for
(`files/KEY/answer.json`), and two names for one file run once. The summary
(`reports/audit/NAME/index.html` and `summary.csv`) has a row per name given, the answer's columns
(`answer.COLUMNS`), each row linking its file's what-if page; sorted by name, no timestamps, so two
audits of the same files give the same bytes whichever machine ran them.

With `--cluster` (`CLUSTER=tcp://...`) the files' what-ifs are Dask tasks (`run_remote`): each runs
in a temporary folder on its worker and returns what it wrote; the client alone writes, and a
worker that dies costs its file one retry. A line per finished file says how many are done and
about how long is left.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import params as P
from . import whatif
from .answer import COLUMNS, NOT, SIDES, answer, shown_bridges
from .errors import InputError, first_line
from .gguf_meta import read_kv
from .overrides import parse_all
from .paths import DATA, REPORTS, name_problem, write_atomic
from .results import file_sha256
from .whatif import ANALYSES, _input, chosen, safe_name

# a file's weights are served (the matrix and llama-server on the file itself) up to this size by
# default, what a 2-core machine serves in about a minute: SmolLM2-135M at Q4_1 (94 MiB) took 74 s of
# a worker's time in the server analysis on its own weights (22 s on the stand-in); serving grows with
# the weights, so a larger file gets the stand-in unless asked (SERVER=1, or a larger MAX_MB)
MAX_MB = 100.0
ANSWER = "answer.json"


@dataclass
class File:
    """One file given (or found under a folder given): `shown`, its name as the user gave it;
    `error`, the one line that refuses it; else its `key` and whether the server runs on its weights."""

    shown: str
    path: Path
    error: str = ""
    key: str = ""
    sha256: str = ""
    weights: bool = False
    has_weights: bool = False


def found(given: list[str]) -> list[File]:
    """Every file `given` names: a folder's `*.gguf` (sorted, its subfolders too), a file as it is,
    a missing path refused."""
    out: list[File] = []
    for g in given:
        p = Path(g)
        if p.is_dir():
            inside = sorted(q for q in p.rglob("*.gguf") if not q.is_dir())
            if not inside:
                out.append(File(g, p, error=f"{g}: a folder with no .gguf file in it"))
            out += [File(str(q), q) for q in inside]
        else:
            out.append(File(g, p))
    return out


def cause(f: File) -> str:
    """A refused file's cause, without its name."""
    return f.error.removeprefix(f"{f.shown}: ")


def key(sha256: str, overrides: list[str], weights: bool, names: tuple[str, ...]) -> str:
    """What a file's answer depends on beyond the code: its bytes, its overrides, the server's model
    and the analyses run."""
    what = "\n".join([sha256, *overrides, f"weights={weights}", " ".join(names)])
    return hashlib.sha256(what.encode()).hexdigest()[:16]


def check(f: File, overrides: list[str], max_bytes: float, server: bool, names: tuple[str, ...]) -> File:
    """`f` checked at the edge, as a what-if checks its file; its key once its bytes are read."""
    if f.error:
        return f
    try:
        _input(f.path, None, overrides)  # a GGUF, its tokenizer header, the name and the overrides
        _, n_tensors, _ = read_kv(f.path)
    except InputError as e:
        # named as the user gave it (a folder's file by its path under the folder), the cause as the what-if says it
        f.error = f"{f.shown}: {first_line(e.cause)}"
        return f
    except OSError as e:
        f.error = f"{f.shown}: {e.strerror or e}"
        return f
    f.has_weights = n_tensors > 0
    f.weights = f.has_weights and (server or f.path.stat().st_size <= max_bytes)
    f.sha256 = file_sha256(f.path.resolve())
    f.key = key(f.sha256, overrides, f.weights, names)
    return f


def job(f: File, out: Path, overrides: list[str], names: tuple[str, ...]) -> dict[str, Any]:
    """One file's what-if as a task: plain values only (it may travel to a Dask worker)."""
    return {
        "path": str(f.path.resolve()),
        "name": safe_name(f.path),
        "key": f.key,
        "overrides": overrides,
        "weights": f.weights,
        "analyses": list(names),
        "out": str(out / "files" / f.key),
        "models": str(DATA / "audit" / "models" / f.key),
    }


def run_remote_job(j: dict[str, Any]) -> dict[str, Any]:
    """A file's what-if on a Dask worker: `python -m llgbridge.whatif` in a temporary folder (a
    process of its own: a Dask worker is a daemon, which may not start the what-if's pool), and
    every file it wrote, its folder's name replaced by the one the client writes them to."""
    from .remote import _files  # a worker's: the client never loads the remote runner's imports

    with tempfile.TemporaryDirectory(prefix="audit-") as tmp:
        where = Path(tmp) / "r"
        cmd = [
            sys.executable,
            "-m",
            "llgbridge.whatif",
            "--name",
            j["name"],
            "--override",
            " ".join(shlex.quote(o) for o in j["overrides"]),
            "--analyses",
            " ".join(j["analyses"]),
            "--out",
            str(where),
            "--models-dir",
            str(Path(tmp) / "models"),
            *(["--weights"] if j["weights"] else []),
            "--",
            j["path"],
        ]
        done = subprocess.run(cmd, capture_output=True, text=True)
        failed = [line.removeprefix("FAILED ") for line in done.stderr.splitlines() if line.startswith("FAILED ")]
        if done.returncode and not failed:
            failed = [f"the what-if exited {done.returncode}: {first_line(done.stderr.strip()[-300:])}"]
        return {"failed": failed, "files": _files(where, [(str(where), j["out"])]) if where.is_dir() else {}}


def _left(done: int, total: int, t0: float) -> str:
    if done >= total:
        return "done"
    per = (time.monotonic() - t0) / max(done, 1)
    s = per * (total - done)
    return f"about {s / 60:.0f} min left" if s >= 90 else f"about {s:.0f} s left"


def _planned(jobs: list[dict[str, Any]], got: dict[str, dict[str, Any]]) -> tuple[list[Any], list[Any], dict[str, int]]:
    """(each file's job, input, folder and lock; the pool's sides; each file's count of runs): every
    file planned and locked as a what-if plans and locks it, a refusal its entry in `got`."""
    plans, sides, left = [], [], {}
    for j in jobs:
        try:
            it = whatif._input(Path(j["path"]), j["name"], j["overrides"], j["weights"])
            names = tuple(j["analyses"])
            runs = whatif._plan(it.input, {}, Path(j["models"]), names)
            base = whatif._plan(it.base, {}, Path(j["models"]) / "without", names) if it.ovs else []
            out = Path(j["out"])
            held = whatif._only_one(out)
        except InputError as e:
            got[j["key"]] = {"failed": [str(e)]}
            continue
        plans.append((j, it, out, held))
        sides.append((it.input, runs, out))
        if it.ovs:
            sides.append((it.base, base, out / "without"))
        left[j["key"]] = len(runs) + len(base)
    return plans, sides, left


def run_local(jobs: list[dict[str, Any]], say: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    """Every file's analyses on one pool of workers (`whatif._run_all`, as a what-if with overrides
    runs its two sides): the workers and their kernels start once for the audit, not once a file, and
    both stay busy across files. A line when a file's last analysis ends; then each file's page."""
    got: dict[str, dict[str, Any]] = {}
    plans, sides, left = _planned(jobs, got)
    if not plans:
        return got
    owner = {n: j["key"] for j, it, _, _ in plans for n in {it.name, it.plain}}
    t0, finished = time.monotonic(), [0]

    def heard(line: str) -> None:
        # a run's line is "[analysis] NAME ok in ..." (the audit's names hold no space): a file is done
        # when its last analysis is
        name = line.split("] ", 1)[1].split(" ", 1)[0] if line.startswith("[") and "] " in line else ""
        k = owner.get(name)
        if k is None or line.startswith("[whatif"):
            return
        left[k] -= 1
        if not left[k]:
            finished[0] += 1
            say(f"[audit {finished[0]}/{len(plans)}] {name}: analyses done; {_left(finished[0], len(plans), t0)}")

    whatif.run.fast_imports()
    statuses = whatif._run_all(sides, heard)
    # the floor: the analyses' own time on the pool's workers; the rest of the wall is the suite's
    work = sum(float((st.get("timing") or {}).get("wall", 0.0)) for side in statuses for st in side)
    workers = max(1, min(whatif.WORKERS, len(os.sched_getaffinity(0))))
    say(
        f"[audit] analyses: {work:.1f} s of the workers' time (a floor of {work / workers:.1f} s on {workers} "
        f"workers); wall so far {time.monotonic() - t0:.1f} s"
    )
    i = 0
    for j, it, out, held in plans:
        mine, plain = statuses[i], (statuses[i + 1] if it.ovs else [])
        i += 2 if it.ovs else 1
        whatif._pages(it, out, plain)
        held.close()
        bad = [s for s in [*mine, *plain] if s["status"] != "ok"]
        # the file's analyses' own time on the workers, its share of the floor (make bench's audit part)
        own = sum(float((s.get("timing") or {}).get("wall", 0.0)) for s in [*mine, *plain])
        got[j["key"]] = {"failed": [f"{s['notebook']}: {s['error']}" for s in bad], "seconds": own}
    say(f"[audit] pages written; wall {time.monotonic() - t0:.1f} s")
    return got


def _said(r: dict[str, Any]) -> str:
    return f"{len(r['failed'])} analyses failed" if r["failed"] else "ok"


def run_remote(jobs: list[dict[str, Any]], cluster: str, say: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    """Each job a Dask task on the scheduler at `cluster` ("local:N": a LocalCluster of N workers, for
    the tests); what each returns is written here, by the client alone. A worker that dies costs its
    job one retry; a second death is that file's failure, one line."""
    from distributed import as_completed
    from distributed.scheduler import KilledWorker

    # Dask is loaded only for an audit on a scheduler
    from .analyses.corpus.cluster import dask_client
    from .pool import ATTEMPTS

    local = cluster.startswith("local:")
    got: dict[str, dict[str, Any]] = {}
    tries = {j["key"]: 1 for j in jobs}
    token = os.urandom(4).hex()  # task keys unique to this run: a shared scheduler never hands back another's
    t0 = time.monotonic()
    with dask_client(int(cluster.split(":")[1]) if local else 1, None if local else cluster, wait=30.0) as client:

        def submit(j: dict[str, Any]) -> Any:
            return client.submit(
                run_remote_job, j, key=f"audit-{token}-{j['key']}-{tries[j['key']]}", pure=False, retries=0
            )

        by_key = {}
        futures = []
        for j in jobs:
            fut = submit(j)
            by_key[fut.key] = j
            futures.append(fut)
        ac = as_completed(futures)
        del futures
        for fut in ac:
            j = by_key[fut.key]
            try:
                r = fut.result()
            except KilledWorker as e:
                if tries[j["key"]] < ATTEMPTS:
                    say(f"[audit] {j['name']}: its worker died ({first_line(str(e))[:120]}); once more, on another")
                    tries[j["key"]] += 1
                    nf = submit(j)
                    by_key[nf.key] = j
                    ac.add(nf)
                    fut.release()
                    continue
                r = {"failed": [f"the worker died twice running it ({first_line(str(e))[:200]})"], "files": {}}
            except Exception as e:  # noqa: BLE001 - one file's failure is its row, not the audit's
                r = {"failed": [f"{type(e).__name__}: {first_line(str(e))}"], "files": {}}
            fut.release()
            _write(Path(j["out"]), r.pop("files", {}))
            got[j["key"]] = r
            say(f"[audit {len(got)}/{len(jobs)}] {j['name']}: {_said(r)}; {_left(len(got), len(jobs), t0)}")
    return got


def _write(out: Path, files: dict[str, bytes]) -> None:
    if out.exists():
        shutil.rmtree(out)
    for rel, data in files.items():
        p = out / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)


@dataclass
class Audit:
    """What an audit did: every file given, with its row; the keys it ran (the others were current)."""

    files: list[File]
    rows: list[dict[str, str]]
    ran: list[str]
    # per key run on this machine, its analyses' own seconds on the workers (none from a cluster)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def failed(self) -> list[dict[str, str]]:
        return [r for r in self.rows if r["status"] != "ok"]


@dataclass(frozen=True)
class Options:
    """How the files are audited: llama.cpp's key `overrides` every load takes; the size under which
    a file's own weights are served (`max_mb`), or every file's (`server`); the analyses (`names`,
    every what-if analysis when empty); a Dask scheduler (`cluster`; "local:N" for a local one)."""

    overrides: tuple[str, ...] = ()
    max_mb: float = MAX_MB
    server: bool = False
    names: tuple[str, ...] = ()
    cluster: str = ""


def audit(
    given: list[str],
    name: str = "audit",
    opts: Options | None = None,
    out: Path | None = None,
    say: Callable[[str], None] = print,
) -> Audit:
    """Audit every file `given` names into `out` (default reports/audit/NAME); InputError for a NAME
    that could not name a folder or an override llama.cpp's syntax refuses (before anything runs)."""
    opts = opts or Options()
    why = name_problem(name)
    if why:
        raise InputError("NAME", why)
    if not given:
        raise InputError("MODELS", "no file or folder given")
    overrides = [o.text for o in parse_all(list(opts.overrides))]
    names = opts.names or ANALYSES
    cluster = opts.cluster
    out = out or REPORTS / "audit" / name
    files = [check(f, overrides, opts.max_mb * 2**20, opts.server, names) for f in found(given)]
    for f in files:
        if f.error:
            say(f"audit: {f.error}")
    todo: dict[str, dict[str, Any]] = {}
    for f in files:
        if f.key and f.key not in todo and not (out / "files" / f.key / ANSWER).exists():
            todo[f.key] = job(f, out, overrides, names)
    # the what-ifs share one pool, which tells their runs apart by input name: two files called
    # model.gguf in two folders get their keys appended
    seen: dict[str, int] = {}
    for j in todo.values():
        seen[j["name"]] = seen.get(j["name"], 0) + 1
    for j in todo.values():
        if seen[j["name"]] > 1:
            j["name"] = f"{j['name']}-{j['key'][:8]}"
    keys = {f.key for f in files if f.key}
    say(
        f"[audit {name}] {len(files)} files, {len(keys)} distinct, {len(todo)} to run"
        + (f" on {cluster}" if cluster else "")
    )
    jobs = list(todo.values())
    got = (run_remote(jobs, cluster, say) if cluster else run_local(jobs, say)) if jobs else {}
    for k, r in got.items():
        folder = out / "files" / k
        row = answer(folder / "tables") if (folder / "tables").is_dir() else {c: NOT for c in COLUMNS}
        folder.mkdir(parents=True, exist_ok=True)
        write_atomic(folder / ANSWER, json.dumps({"answer": row, "failed": r["failed"]}, indent=1, sort_keys=True))
    rows = [summary_row(f, out, overrides) for f in files]
    rows.sort(key=lambda r: r["file"])
    write_summary(out, rows, name)
    return Audit(files, rows, list(got), {k: r["seconds"] for k, r in got.items() if "seconds" in r})


SUMMARY = ("file", "status", "sha256", "overrides", "server_on", "page", *COLUMNS)


def summary_row(f: File, out: Path, overrides: list[str]) -> dict[str, str]:
    """A file's row: as given, its status, and its answer (read back from its what-if's answer.json)."""
    row = dict.fromkeys(SUMMARY, "")
    row["file"] = f.shown
    if f.error:
        row["status"] = f"refused: {cause(f)}"
        return row
    got = json.loads((out / "files" / f.key / ANSWER).read_text(encoding="utf-8"))
    row.update(got["answer"])
    row["status"] = "ok" if not got["failed"] else "failed: " + "; ".join(got["failed"])[:300]
    row["sha256"] = f.sha256
    row["overrides"] = " ".join(overrides)
    row["page"] = f"files/{f.key}/index.html"
    # where the server ran, from its own table (the answer), and why there when not on the file's weights
    row["server_on"] = (
        "not run"
        if row["server_weights"] == NOT
        else "the file's own weights"
        if row["server_weights"] == "the file's own weights"
        else "a random-weight stand-in (over the size limit; SERVER=1 serves its weights)"
        if f.has_weights
        else "a random-weight stand-in (a vocab-only file)"
    )
    return row


def write_summary(out: Path, rows: list[dict[str, str]], name: str) -> None:
    """summary.csv and index.html: a row per file given, the same bytes for the same files."""
    from .report.templating import environment  # jinja2, once the files are run

    out.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=SUMMARY, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    write_atomic(out / "summary.csv", buf.getvalue())
    ok = [r for r in rows if not r["status"].startswith("refused")]
    bridges = ["upstream", "fixed", "ownbridge"]
    if ok and not any("ownbridge" in shown_bridges(r) for r in ok):
        bridges = bridges[:2]
    page = (
        environment()
        .get_template("audit.html.j2")
        .render(
            name=name,
            rows=ok,
            refused=[r for r in rows if r["status"].startswith("refused")],
            bridges=bridges,
            sides=SIDES,
            NOT=NOT,
        )
    )
    write_atomic(out / "index.html", page)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--models", default="", help="files and folders as one string, split as a shell would (MODELS)")
    ap.add_argument("--name", default="")
    ap.add_argument("--override", default="", help="llama.cpp key overrides, KEY=TYPE:VALUE (OVERRIDE)")
    ap.add_argument(
        "--max-mb", default="", help=f"serve a file's own weights under this size (MAX_MB, default {MAX_MB:g})"
    )
    ap.add_argument("--server", default="", help="1: serve every file's own weights (SERVER)")
    ap.add_argument("--analyses", default="", help="only these analyses (ANALYSES)")
    ap.add_argument("--cluster", default="", help="a Dask scheduler, tcp://host:port (CLUSTER)")
    ap.add_argument("--out", type=Path, default=None, help="the audit's folder (default reports/audit/NAME)")
    a = ap.parse_args(argv)
    try:
        given = [*a.paths, *shlex.split(a.models)]
        try:
            max_mb = float(a.max_mb) if a.max_mb else MAX_MB
        except ValueError:
            raise InputError("MAX_MB", f"{a.max_mb!r} is not a number of MiB") from None
        if a.server not in ("", "0", "1"):
            raise InputError("SERVER", f"{a.server!r}: 1 or nothing")
        opts = Options(
            tuple(P.from_argv(x) for x in shlex.split(a.override)),
            max_mb,
            a.server == "1",
            chosen(a.analyses),
            a.cluster,
        )
        got = audit(given, a.name or "audit", opts, a.out)
    except ValueError as e:  # InputError, or shlex's unbalanced quote
        print(f"audit: {e}", file=sys.stderr)
        return 2
    out = a.out or REPORTS / "audit" / (a.name or "audit")
    print(f"audit: {len(got.rows)} files, {len(got.ran)} run; summary: {out / 'index.html'}")
    for r in got.failed:
        print(f"FAILED {r['file']}: {r['status']}", file=sys.stderr)
    return 1 if got.failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
