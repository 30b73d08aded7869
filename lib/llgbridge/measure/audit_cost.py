"""What `make audit` costs (issue 60 item 7): a 30-file audit on this machine's pool of workers,
its wall against its floor, the suite's own time per file beyond it, and each file's cost against
its vocab's size.

The 30 files: llama.cpp's vocab fixtures, and copies of the first ones with
`tokenizer.ggml.add_space_prefix` flipped in the file (gguf-py writes each anew, as a user's edit
would), until there are 30: each a file of its own sha256, so none is run twice.

Two floors, as issue 60 item 7 names them:
- the wall's: the code under review's own work in the audit's runs (llama.cpp's, llguidance's,
  llama-server's and the other engines'), counted as the report's floor counts it
  (`floor.own_seconds`, with this `make bench` run's splits), divided by the workers: the wall is
  held within 1.25 x it;
- the per-file overhead's: the analyses' runs' own walls (their kernels', as each run's timing
  records it) divided by the workers; what the wall holds beyond it is the suite's per file (the
  pool's start, the checks and sha256s, the pages and the summary): at most 1 s a file.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import audit as A
from ..gguf_meta import read_meta
from ..paths import REPORTS, VOCABS
from ..synth import _tokenizer_kv
from ..whatif import WORKERS
from .benchmd import BenchPart, csv_row, table
from .floor import csv_rows, own_seconds, split_shares
from .recorded import read_runs

N_FILES = 30
# issue 60: the wall within 1.25 x the floor, at most 1 s of the suite's own time per file beyond it
GOAL_RATIO, GOAL_PER_FILE = 1.25, 1.0
ANALYSES: tuple[str, ...] = ()  # every what-if analysis, as `make audit` runs by default


def flipped(src: Path, dest: Path) -> Path:
    """`src`'s tokenizer with `add_space_prefix` the other way round (true where it has none), written by gguf-py."""
    import gguf

    kv = _tokenizer_kv(src)
    before = kv.get("tokenizer.ggml.add_space_prefix")
    w = gguf.GGUFWriter(str(dest), str(read_meta(src).architecture or "llama"))
    for k, (value, vtype, sub) in kv.items():
        if k != "tokenizer.ggml.add_space_prefix":
            w.add_key_value(k, value, vtype, sub)
    w.add_bool("tokenizer.ggml.add_space_prefix", not (before[0] if before else False))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dest


def files(folder: Path, n: int = N_FILES) -> list[Path]:
    """`n` files in `folder`: the fixtures, then flipped copies of them in the same order."""
    fixtures = sorted(VOCABS.glob("ggml-vocab-*.gguf"))
    made = []
    for src in fixtures[:n]:
        dest = folder / src.name.removeprefix("ggml-vocab-")
        dest.write_bytes(src.read_bytes())
        made.append(dest)
    for src in fixtures[: max(0, n - len(made))]:
        made.append(flipped(src, folder / f"{src.name.removeprefix('ggml-vocab-').removesuffix('.gguf')}-flipped.gguf"))
    return made


def under_review(out: Path, split_rows: list[dict[str, Any]] | None = None) -> float:
    """The code under review's own seconds in every run under `out` (each what-if's results, both
    sides), counted as the report's floor counts them; the splits' shares from `split_rows` (this
    `make bench` run's), else the last snapshot's."""
    shares = split_shares(csv_rows(REPORTS / "bench.csv") if split_rows is None else split_rows)
    total = 0.0
    for timing in sorted(out.rglob(".timing")):
        own, _ = own_seconds(timing.parent, shares)
        total += sum(own(r) for r in read_runs(timing.parent))
    return total


def audit_cost(
    n: int = N_FILES, names: tuple[str, ...] = ANALYSES, split_rows: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """One audit of `n` files from empty, timed: its wall, the code under review's own seconds in
    it, and each file's vocab size and its analyses' own seconds."""
    with tempfile.TemporaryDirectory(prefix="audit-cost-") as tmp:
        (Path(tmp) / "in").mkdir()
        given = files(Path(tmp) / "in", n)
        sizes = {p.name: read_meta(p).n_tokens or 0 for p in given}
        t0 = time.perf_counter()
        got = A.audit([str(p) for p in given], "bench", A.Options(names=names), out=Path(tmp) / "out", say=print)
        wall = time.perf_counter() - t0
        review = under_review(Path(tmp) / "out", split_rows)
    rows = sorted(
        (
            {"file": f.path.name, "n_tokens": sizes[f.path.name], "seconds": got.seconds[f.key]}
            for f in got.files
            if f.key in got.seconds
        ),
        key=lambda r: (r["n_tokens"], r["file"]),
    )
    return {
        "wall": wall,
        "workers": WORKERS,
        "n": len(given),
        "files": rows,
        "review": review,
        "failed": [r["file"] for r in got.failed],
    }


def audit_context(c: dict[str, Any] | None) -> dict[str, Any] | None:
    """The audit's section: wall against floor, the suite's time per file, and each file's cost."""
    if not c or not c["files"]:
        return None
    work = sum(r["seconds"] for r in c["files"])
    floor = work / c["workers"]
    review = c["review"] / c["workers"]
    ratio = c["wall"] / review if review else float("inf")
    per_file = (c["wall"] - floor) / c["n"]
    return {
        "n": c["n"],
        "workers": c["workers"],
        "analyses": ", ".join(ANALYSES) or "every what-if analysis",
        "wall": f"{c['wall']:.1f}",
        "work": f"{work:.1f}",
        "floor": f"{floor:.1f}",
        "ratio": f"{ratio:.2f}",
        "review": f"{c['review']:.1f}",
        "review_floor": f"{review:.1f}",
        "runs_ratio": f"{c['wall'] / floor:.2f}" if floor else "-",
        "per_file": f"{per_file:.2f}",
        "verdict_ratio": f"{'met' if ratio <= GOAL_RATIO else 'not met'} ({ratio:.2f} against {GOAL_RATIO})",
        "verdict_per_file": (
            f"{'met' if per_file <= GOAL_PER_FILE else 'not met'} ({per_file:.2f} s against {GOAL_PER_FILE} s)"
        ),
        "failed": ", ".join(c["failed"]),
        "table": table(
            ["file", "tokens", "its analyses' own s", "µs per token"],
            [
                [
                    r["file"],
                    f"{r['n_tokens']:,}",
                    f"{r['seconds']:.1f}",
                    f"{1e6 * r['seconds'] / max(1, r['n_tokens']):.0f}",
                ]
                for r in c["files"]
            ],
        ),
    }


@dataclass(frozen=True)
class AuditCost(BenchPart):
    """`audit_cost`'s figures: a row per file, and the audit's wall and floor."""

    c: dict[str, Any] | None

    def rows(self) -> list[dict[str, object]]:
        if not self.c:
            return []
        work = sum(r["seconds"] for r in self.c["files"])
        out = [csv_row("audit", r["file"], r["n_tokens"], "file", r["seconds"]) for r in self.c["files"]]
        out.append(csv_row("audit", "(all)", self.c["n"], "wall", self.c["wall"]))
        out.append(csv_row("audit", "(all)", self.c["n"], "floor", work / self.c["workers"]))
        out.append(csv_row("audit", "(all)", self.c["n"], "code_under_review", self.c["review"] / self.c["workers"]))
        return out

    def context(self) -> dict[str, Any]:
        return {"audit": audit_context(self.c)}

    def failures(self) -> list[str]:
        return [f"audit: {f} failed" for f in (self.c or {}).get("failed", [])]
