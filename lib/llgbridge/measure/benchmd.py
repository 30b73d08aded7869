"""What every part of `make bench` shares: the `BenchPart` a measurement returns, the rows of
`reports/bench.csv`, the tables and the render of `reports/bench.md` (`templates/bench.md.j2`).

Each measurement (`bench.MEASUREMENTS`) returns a frozen `BenchPart` that knows its own rows of
bench.csv, its own sections of bench.md and any file of its own beside them, so the page is a loop
over the parts and a part is read, changed and tested alone.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from ..report import Table
from ..report.templating import environment

# the template's sections, each left out where its key is None
SECTIONS = (
    "census",
    "ablation",
    "builds",
    "mask_path",
    "generation",
    "decode",
    "server_load",
    "corpus_time",
    "native_split",
    "server_split",
    "inproc_split",
    "whatif",
    "audit",
    "tests",
    "regen",
    "floor",
    "engines_cost",
    "engines_parts",
    "scale",
)


class BenchPart:
    """One measurement's result: its rows of bench.csv, its sections of bench.md (template keys
    to their context; None leaves a section out) and what it writes beside them."""

    def rows(self) -> list[dict[str, object]]:
        return []

    def context(self) -> dict[str, Any]:
        raise NotImplementedError

    def write(self, out: Path) -> None:
        """Files of this part's own in `out`, beside bench.csv and bench.md (none by default)."""

    def failures(self) -> list[str]:
        """What went wrong in the run, a line each, said on stderr after the reports are written."""
        return []

    def failed(self) -> bool:
        """The run must not be taken as it is: `make bench` exits non-zero (its reports written)."""
        return False


def table(columns: list[str], rows: Sequence[Sequence[object]]) -> Table:
    return Table(pd.DataFrame([[str(x) for x in r] for r in rows], columns=columns))


def csv_row(bench: str, vocab: str, n: int, variant: str, s: float, ratio: float | None = None) -> dict[str, object]:
    """One tidy row of bench.csv: `s` seconds (or a rate), and per token of `n`."""
    return {
        "benchmark": bench,
        "vocab": vocab,
        "n_tokens": n,
        "variant": variant,
        "seconds": round(s, 6),
        "ratio": "" if ratio is None else round(ratio, 3),
        "us_per_token": round(1e6 * s / max(n, 1), 4),
    }


def csv_text(rows: list[dict[str, object]]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def render(context: dict[str, Any]) -> str:
    """templates/bench.md.j2 with `context`; a section whose key is None is left out."""
    env = environment()
    # every section ends in a blank line; the page does not
    return env.get_template("bench.md.j2").render(dict.fromkeys(SECTIONS) | context).rstrip("\n") + "\n"


def render_parts(parts: Sequence[BenchPart]) -> str:
    """bench.md from `parts`' sections (those of a part not run are left out)."""
    return render({k: v for p in parts for k, v in p.context().items()})
