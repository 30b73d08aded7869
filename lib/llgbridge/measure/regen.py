"""How long `make report` takes from empty results, and where the time goes (`make bench`).

    python -m llgbridge.measure.regen [--content today|full] [--jobs 1 2]

Each regeneration runs the real `make report` in a copy of the tree (the code, the notebooks,
the Makefile; the venv, the fixtures, the models, the native build and the schemas shared by
symlink, so nothing is set up or fetched again and nothing of the real `data/results` or
`reports/` is touched), from empty results, and reads back what every run recorded
(`RESULTS/.timing/`, written by `run.Worker`, `run.execute`, `batch` and `report`).

Two contents:
- `today`: the issue's yardstick (issue 15): the 19 fixtures, the six per-vocab analyses, the
  matrix on the six synthetic models;
- `full`: everything `make report` makes, with the native differential, the two real models (their
  vocabs in every analysis, their matrix) and the corpus sample.

The split, per run: *analysis* is the seconds the kernel spent in the notebook's cells less the
vocab's load; everything else is overhead: the worker's interpreter and imports, the kernel's
start and imports, the vocab load, handing the notebook over, the reset between notebooks, the
HTML export and the writes, Make and the planner, the report's render. On a serial run,
overhead = wall - analysis, so nothing is left uncounted.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..paths import DATA, ROOT
from ..report import Table
from .benchmd import BenchPart, csv_row, table

CONTENTS: dict[str, dict[str, str]] = {
    # issue 15's yardstick, as it was measured: no native differential, server, real models or corpus
    "today": {
        "ANALYSES": "census leak forced probe exactness soundness matrix",
        "INPUTS": "REAL_VOCABS= CORPUS_SAMPLE_VOCABS=",
    },
    "full": {},
}
GOALS = {"serial": 180.0, "j2": 120.0, "overhead_share": 0.25}  # issue 15, for `today`

# what a regeneration writes that measures its own run, not a page of the report: the executed
# notebooks (their cells' timestamps), the kernels' logs, and the matrix's, the server's and the
# corpus's pages (each plots its own timings: tokens per second, llama-server's tokens per second,
# µs per mask)
NOT_COMPARED = ("notebooks/", "logs/", "html/matrix/", "html/server/", "html/corpus/", ".built")


@dataclass
class Regen:
    content: str
    jobs: int
    wall: float
    returncode: int
    runs: list[dict[str, Any]] = field(default_factory=list)
    pool: dict[str, Any] = field(default_factory=dict)
    report: float = 0.0

    @property
    def analysis(self) -> float:
        return sum(float(r.get("analysis", 0.0)) for r in self.runs)

    @property
    def overhead(self) -> float:
        """Core-seconds outside the analyses: wall x jobs - analysis (on a serial run, wall - analysis)."""
        return self.wall * self.jobs - self.analysis

    @property
    def share(self) -> float:
        return self.overhead / (self.wall * self.jobs) if self.wall else 0.0

    def parts(self) -> dict[str, float]:
        """The overhead in its parts, each summed over the runs; `make, planner, idle` is the rest."""

        def total(key: str) -> float:
            return sum(float(r.get(key, 0.0)) for r in self.runs)

        pooled = [r for r in self.runs if "between" in r]
        alone = [r for r in self.runs if "between" not in r]
        p = {
            "worker start (interpreter, imports)": sum(
                float(w.get("process", 0.0)) for w in self.pool.get("workers", [])
            ),
            "kernel start and imports": total("kernel_start"),
            "vocab load": total("load"),
            "between notebooks (reset, timings)": total("between"),
            "HTML export and writes": total("publish"),
            "handing a notebook over": sum(
                float(r["wall"])
                - float(r["cells"])
                - float(r.get("between", 0.0))
                - float(r.get("publish", 0.0))
                - float(r.get("kernel_start", 0.0))
                for r in pooled
            ),
            "one-run processes (papermill: start, kernel, export)": sum(
                float(r["wall"]) - float(r["cells"]) for r in alone
            ),
            "report render": self.report,
        }
        p["make, planner, idle"] = self.overhead - sum(p.values())
        return {k: round(v, 2) for k, v in p.items()}

    def by_analysis(self) -> list[dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for r in self.runs:
            a = out.setdefault(
                str(r["notebook"]), {"analysis": str(r["notebook"]), "runs": 0, "wall": 0.0, "compute": 0.0}
            )
            a["runs"] += 1
            a["wall"] += float(r["wall"])
            a["compute"] += float(r.get("analysis", 0.0))
        for a in out.values():
            a["overhead"] = a["wall"] - a["compute"]
            a["share"] = a["overhead"] / a["wall"] if a["wall"] else 0.0
            for k in ("wall", "compute", "overhead"):
                a[k] = round(a[k], 2)
            a["share"] = round(a["share"], 3)
        return sorted(out.values(), key=lambda a: -a["wall"])


def tree_copy(dest: Path) -> Path:
    """The code in a fresh folder, the large set-up shared (see the module's docstring)."""
    tree = dest / "tree"
    for part in ("lib", "notebooks", "native", "patches", "Makefile", "pyproject.toml"):
        src = ROOT / part
        if src.is_dir():
            shutil.copytree(src, tree / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, tree / part)
    (tree / ".venv").symlink_to(ROOT / ".venv")
    (tree / ".stamp").touch()
    (tree / "data").mkdir()
    for d in ("vocabs", "models", "native", "schemas"):
        if (DATA / d).exists():
            (tree / "data" / d).symlink_to(DATA / d)
    return tree


def regenerate(
    tree: Path, content: str, jobs: int, log: Path | None = None, overrides: dict[str, str] | None = None
) -> Regen:
    """`make report` in `tree` from empty results; its output to `log`, its progress as a bar.
    `overrides` (Make variables) replace the content's own."""
    from tqdm import tqdm

    for d in ("data/results", "reports"):
        shutil.rmtree(tree / d, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    env["PYTHONPATH"] = str(tree / "lib")  # before the venv's editable path to the real tree
    settings = {**CONTENTS.get(content, {}), **(overrides or {})}
    cmd = ["make", f"-j{jobs}", "report", "STAMP=.stamp", *(f"{k}={v}" for k, v in settings.items())]
    bar = tqdm(total=0, desc=f"make report ({content}, -j{jobs})", file=sys.stderr, unit="run")
    t0 = time.monotonic()
    with subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as p:
        lines = []
        assert p.stdout is not None
        for line in p.stdout:
            lines.append(line)
            m = re.search(r"\((\d+)/(\d+)\)\s*$", line)
            if m:
                bar.total = int(m[2])
                bar.n = int(m[1])
                bar.refresh()
        code = p.wait()
    wall = time.monotonic() - t0
    bar.close()
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("".join(lines))
    timing = tree / "data" / "results" / ".timing"
    runs = [json.loads(f.read_text()) for f in sorted(timing.glob("*/*.json"))]
    pool = json.loads((timing / "pool.json").read_text()) if (timing / "pool.json").exists() else {}
    report = (
        json.loads((timing / "report.json").read_text()).get("wall", 0.0) if (timing / "report.json").exists() else 0.0
    )
    return Regen(content, jobs, wall, code, runs, pool, float(report))


def compare(a: Path, b: Path) -> tuple[int, list[str]]:
    """(files compared, files that differ) between two `reports/` folders, less what measures a run."""

    def files(root: Path) -> dict[str, bytes]:
        return {
            str(f.relative_to(root)): f.read_bytes()
            for f in root.rglob("*")
            if f.is_file() and not str(f.relative_to(root)).startswith(NOT_COMPARED)
        }

    fa, fb = files(a), files(b)
    differ = sorted(k for k in fa.keys() | fb.keys() if fa.get(k) != fb.get(k))
    return len(fa.keys() | fb.keys()), differ


def measure(contents: tuple[str, ...] = ("today", "full"), jobs: tuple[int, ...] = (1, 2)) -> dict[str, Any]:
    """Every (content, jobs) regeneration, one after the other in one run, and serial against -jN."""
    out: dict[str, Any] = {"regens": [], "identity": {}}
    with tempfile.TemporaryDirectory(prefix="llgbridge-regen-") as tmp:
        tree = tree_copy(Path(tmp))
        for content in contents:
            kept: dict[int, Path] = {}
            for j in jobs:
                print(
                    f"report regeneration: {content}'s content, make -j{j} report, from empty results",
                    file=sys.stderr,
                    flush=True,
                )
                r = regenerate(tree, content, j, DATA / "bench" / f"regen-{content}-j{j}.log")
                if r.returncode != 0:
                    print(
                        f"report regeneration: make exited {r.returncode} (see data/bench/regen-{content}-j{j}.log)",
                        file=sys.stderr,
                    )
                out["regens"].append(r)
                kept[j] = Path(tmp) / f"reports-{content}-j{j}"
                shutil.move(str(tree / "reports"), kept[j])
            if len(kept) > 1:
                base = kept[min(kept)]
                for j, other in kept.items():
                    if other != base:
                        out["identity"][content, j] = compare(base, other)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m llgbridge.measure.regen", description=__doc__.splitlines()[0])
    ap.add_argument("--content", nargs="+", default=["today"], choices=sorted(CONTENTS))
    ap.add_argument("--jobs", nargs="+", type=int, default=[1, 2])
    a = ap.parse_args(argv)
    got = measure(tuple(a.content), tuple(a.jobs))
    for r in got["regens"]:
        print(
            f"{r.content} -j{r.jobs}: {r.wall:.1f} s wall, {r.analysis:.1f} s analysis, {r.overhead:.1f} s overhead "
            f"({100 * r.share:.0f}%), exit {r.returncode}"
        )
        print("  " + ", ".join(f"{k} {v}" for k, v in r.parts().items()))
    for (content, j), (n, differ) in got["identity"].items():
        print(f"{content}: serial vs -j{j}: {n} files, {len(differ)} differ {differ[:5]}")
    return 0


def _by_analysis_table(r: Regen) -> Table:
    return table(
        ["analysis", "runs", "wall s", "compute s", "overhead s", "overhead share"],
        [
            [
                x["analysis"],
                x["runs"],
                f"{x['wall']:.1f}",
                f"{x['compute']:.1f}",
                f"{x['overhead']:.1f}",
                f"{100 * x['share']:.0f}%",
            ]
            for x in r.by_analysis()
        ],
    )


def regen_context(regens: dict[str, Any], goals: dict[str, float]) -> dict[str, Any] | None:
    """The regeneration's section: each run's wall split, serial against -j2, the overhead in its parts."""
    rs = regens["regens"]
    if not rs:
        return None
    return {
        "goals": {
            "serial": f"{goals['serial']:.0f}",
            "j2": f"{goals['j2']:.0f}",
            "overhead": f"{100 * goals['overhead_share']:.0f}",
        },
        "table": table(
            ["content", "make", "runs", "wall s", "analysis s", "overhead s", "overhead share"],
            [
                [
                    r.content,
                    f"-j{r.jobs}",
                    len(r.runs),
                    f"{r.wall:.1f}",
                    f"{r.analysis:.1f}",
                    f"{r.overhead:.1f}",
                    f"{100 * r.share:.0f}%",
                ]
                for r in rs
            ],
        ),
        "identity": [
            {"content": content, "jobs": j, "n": n, "differ": ", ".join(differ[:10]), "n_differ": len(differ)}
            for (content, j), (n, differ) in regens["identity"].items()
        ],
        "parts": table(
            ["part", *(f"{r.content} -j{r.jobs}" for r in rs)],
            [[name, *(f"{r.parts()[name]:.1f}" for r in rs)] for name in rs[0].parts()],
        ),
        "by_analysis": [{"content": r.content, "table": _by_analysis_table(r)} for r in rs if r.jobs == 1],
    }


def _regen_rows(r: Regen) -> list[dict[str, object]]:
    """One regeneration's rows of bench.csv: its wall split, its overhead's parts, and (serial) each analysis."""
    tag = "serial" if r.jobs == 1 else f"j{r.jobs}"
    n = len(r.runs)
    out = [
        csv_row("report_regeneration", r.content, n, tag, r.wall),
        csv_row("report_regeneration", r.content, n, f"{tag}_analysis", r.analysis),
        csv_row("report_regeneration", r.content, n, f"{tag}_overhead", r.overhead, r.share),
        *(csv_row("report_regeneration_part", r.content, n, f"{tag}: {part}", s) for part, s in r.parts().items()),
    ]
    if r.jobs == 1:
        out += [
            csv_row("report_regeneration_analysis", x["analysis"], x["runs"], r.content, x["compute"], x["share"])
            for x in r.by_analysis()
        ]
    return out


@dataclass(frozen=True)
class Regens(BenchPart):
    """`measure`'s result: the regenerations and, per (content, jobs), the files compared with
    the serial run's and those that differ; None where none was asked for."""

    measured: dict[str, Any] | None

    def rows(self) -> list[dict[str, object]]:
        m = self.measured or {"regens": [], "identity": {}}
        out = [x for r in m["regens"] for x in _regen_rows(r)]
        for (content, j), (n, differ) in m["identity"].items():
            out.append(csv_row("report_regeneration_identity", content, n, f"serial_vs_j{j}_differing", len(differ)))
        return out

    def context(self) -> dict[str, Any]:
        return {"regen": regen_context(self.measured or {"regens": [], "identity": {}}, GOALS)}


if __name__ == "__main__":
    raise SystemExit(main())
