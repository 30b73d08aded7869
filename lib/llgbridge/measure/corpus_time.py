"""The report's corpus sample, its masks timed afresh (`make bench`): the report's corpus section
draws its mask-time figure from this snapshot (`bench-corpus-timing.json`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import params
from ..analyses.corpus import compute as corpus
from ..paths import RESULTS, vocab_path, write_atomic
from ..report.data import CORPUS_TIMING_JSON
from .benchmd import BenchPart, table


def corpus_vocabs(names: str | None) -> list[str]:
    """`names` (space-separated), or the vocabs with a corpus result."""
    return names.split() if names is not None else sorted(f.stem for f in (RESULTS / "corpus").glob("*.json"))


def corpus_mask_time(vocabs: list[str]) -> dict[str, Any] | None:
    """The report's corpus sample (the corpus notebook's schemas, seed and bridges) on `vocabs`,
    walked afresh (no job cache) and timed: `llg_matcher_compute_mask` per step, as
    `corpus.timing_rows` and `corpus.histograms`. Here and not in the report, like every timing:
    the report's corpus section draws its figure from this snapshot. No vocab: None."""
    if not vocabs:
        return None
    p = params.declared("corpus")
    ids = corpus.sample_ids(p["schemas"], p["seed"])
    run = corpus.run(
        [(v, corpus.repo_path(vocab_path(v))) for v in vocabs],
        ids,
        list(p["bridges"]),
        corpus.Params(seed=p["seed"]),
        cache_dir=None,
    )
    return {
        "schemas": len(ids),
        "seed": p["seed"],
        "hist_edges_us": corpus.HIST_EDGES,
        "hist": corpus.histograms(run),
        "timing": corpus.timing_rows(run),
    }


def corpus_mask_time_context(snap: dict[str, Any] | None) -> dict[str, Any] | None:
    if not snap:
        return None
    rows = snap["timing"]
    return {
        "schemas": snap["schemas"],
        "table": table(list(rows[0]), [["" if v is None else v for v in r.values()] for r in rows]),
    }


@dataclass(frozen=True)
class CorpusTime(BenchPart):
    """`corpus_mask_time`'s snapshot (None where no vocab was given): a section of bench.md, and
    the snapshot itself beside it for the report."""

    snapshot: dict[str, Any] | None

    def context(self) -> dict[str, Any]:
        return {"corpus_time": corpus_mask_time_context(self.snapshot)}

    def write(self, out: Path) -> None:
        if self.snapshot:
            write_atomic(out / CORPUS_TIMING_JSON, json.dumps(self.snapshot, indent=1, sort_keys=True) + "\n")
