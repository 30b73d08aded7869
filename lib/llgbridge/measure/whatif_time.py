"""`make whatif` end to end (`make bench`, issue 33): every analysis on a 32k-token file, its
synthetic model made and its page written, timed as a user's first what-if runs it (a fresh
report folder and models folder each time), and the same file with one of llama.cpp's key
overrides, its two sides on one pool against one side after the other, in the same run.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from .. import whatif
from ..paths import vocab_path

WHATIF_VOCAB = "llama-spm"  # 32,000 tokens: the "a 32k vocab"
WHATIF_OVERRIDE = "tokenizer.ggml.add_space_prefix=bool:false"  # docs/inputs.md's worked example
GOAL_S = 20.0  # issue 33: a what-if on a 32k vocab, everything included
# (label, overrides, both sides on one pool)
RUNS = (
    ("plain", (), True),
    ("with an override, one side after the other (before)", (WHATIF_OVERRIDE,), False),
    ("with an override, both sides on one pool", (WHATIF_OVERRIDE,), True),
)


def whatif_time(name: str = WHATIF_VOCAB) -> list[dict[str, Any]]:
    """One row per RUNS entry: `run`, `vocab`, `wall` (seconds, the page included), `analyses`
    (runs, both sides), `failed` (runs that did not end ok)."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="llgbridge-whatif-bench-") as tmp:
        mine = Path(tmp) / "mine.gguf"  # a file of the user's own, not a fixture the report knows
        shutil.copy(vocab_path(name), mine)
        for i, (label, overrides, one_pool) in enumerate(RUNS):
            t0 = time.perf_counter()
            statuses = whatif.whatif(
                mine,
                out=Path(tmp) / f"report-{i}",
                models_dir=Path(tmp) / f"models-{i}",
                overrides=list(overrides),
                one_pool=one_pool,
            )
            wall = time.perf_counter() - t0
            n = len(whatif.ANALYSES) * (2 if overrides else 1)
            rows.append(
                {
                    "run": label,
                    "vocab": name,
                    "wall": wall,
                    "analyses": n,
                    "failed": sum(st["status"] != "ok" for st in statuses),
                }
            )
    return rows


def verdict(rows: list[dict[str, Any]]) -> str:
    """The goal against the plain what-if's wall, in words."""
    plain = next((r for r in rows if r["run"] == "plain"), None)
    if plain is None:
        return ""
    met = plain["wall"] <= GOAL_S and not plain["failed"]
    return f"goal <= {GOAL_S:.0f} s for the plain what-if: {'met' if met else 'not met'} ({plain['wall']:.1f} s)"
