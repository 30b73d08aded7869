"""Every result the report reads, loaded once per render into one object that the sections share."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property, wraps
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from ..paths import REPORTS, RESULTS, ROOT
from ..results import SCHEMAS, recorded_versions
from ..results import load as _load

# `make bench`'s load test through the server, and its timing of the corpus sample's masks, beside
# bench.csv (bench.server_load and bench.corpus_mask_time make them)
SERVER_LOAD_CSV = "bench-server-load.csv"
CORPUS_TIMING_JSON = "bench-corpus-timing.json"
# the guide's quotes regenerated on real weights (`quotes`, run by make quotes and make bench)
REAL_QUOTES_JSON = "bench-real-quotes.json"


@dataclass
class PageData:
    """The results under `root`, each analysis parsed and checked once (`results.load`, the only
    reader of result files) the first time a section asks for it, then shared.

    `out` is the folder the pages go to, so that a page can link what lies beside it in the
    repository (`link`); `bench_csv` is the committed `make bench` snapshot the verdict, the
    matrix and the server section quote."""

    root: Path = RESULTS
    out: Path = REPORTS
    bench_csv: Path = REPORTS / "bench.csv"
    # a what-if's own file: {"file", "name", "overrides"}; its page opens with it, not with the PR
    subject: dict[str, Any] | None = None
    _loaded: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]] = field(
        default_factory=dict, repr=False
    )

    def _get(self, analysis: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
        if analysis not in self._loaded:
            gone: list[str] = []
            ok, failed = _load(self.root, analysis, gone)
            self._loaded[analysis] = (ok, failed, gone)
        return self._loaded[analysis]

    def load(self, analysis: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(usable results, failed inputs) of one analysis."""
        ok, failed, _ = self._get(analysis)
        return ok, failed

    def dropped(self) -> list[str]:
        """`results.dropped`: one line per result left out because its input file is gone."""
        return [line for analysis in SCHEMAS for line in self._get(analysis)[2]]

    def versions(self) -> dict[str, str]:
        """What the usable results record they were computed with (`results.recorded_versions`):
        the pages' one source of a version, never what is installed when they are drawn."""
        return recorded_versions([r for analysis in SCHEMAS for r in self._get(analysis)[0]])

    def link(self, target: Path, text: str) -> str:
        """`target` as a relative Markdown link from the pages, where both sit inside the
        repository and the target exists; else its name in code."""
        if not (target.exists() and self.out.resolve().is_relative_to(ROOT)):
            return f"`{text}`"
        rel = Path(os.path.relpath(target, self.out)).as_posix()
        return f"[{text}]({rel}{'/' if target.is_dir() else ''})"

    @property
    def patches_link(self) -> str:
        """The PR's patches folder, as the pages name it."""
        return self.link(ROOT / "patches", "patches/")

    def doc_link(self, name: str) -> str:
        """`docs/NAME` as the pages name it: a fragment that wrote `../docs/` linked a folder that
        is not there from a what-if's page, which sits deeper than the main report's."""
        return self.link(ROOT / "docs" / name, f"docs/{name}")

    @cached_property
    def bench(self) -> pd.DataFrame:
        """The `make bench` snapshot (empty where there is none): the one source of every timing
        the report quotes outside the corpus's own figure."""
        return pd.read_csv(self.bench_csv) if self.bench_csv.exists() else pd.DataFrame()

    @cached_property
    def server_load(self) -> pd.DataFrame:
        """The same snapshot's load test through llama-server (empty where there is none): its
        outcomes vary from run to run, so it is measured there and quoted here."""
        p = self.bench_csv.with_name(SERVER_LOAD_CSV)
        return pd.read_csv(p, keep_default_na=False) if p.exists() else pd.DataFrame()

    @cached_property
    def corpus_timing(self) -> dict[str, Any] | None:
        """The same snapshot's mask time along the corpus sample's walks (None where there is none):
        `hist_edges_us`, `hist` ("vocab/bridge" -> counts) and `timing` (rows), as
        `corpus.payload` holds them."""
        p = self.bench_csv.with_name(CORPUS_TIMING_JSON)
        return json.loads(p.read_text(encoding="utf-8")) if p.exists() else None

    @cached_property
    def real_quotes(self) -> dict[str, Any] | None:
        """The dated snapshot of the guide's quotes on real weights (None where there is none): a
        real model's words depend on the CPU, so they are quoted from there, never computed here."""
        p = self.bench_csv.with_name(REAL_QUOTES_JSON)
        return json.loads(p.read_text(encoding="utf-8")) if p.exists() else None


T = TypeVar("T")


def takes_page_data(fn: Callable[[PageData], T]) -> Callable[[PageData | Path], T]:
    """A section called on its own (a test, a notebook) may be given a results folder: it gets a
    `PageData` of its own. A render passes its one shared `PageData`."""

    @wraps(fn)
    def call(res: PageData | Path) -> T:
        return fn(res if isinstance(res, PageData) else PageData(Path(res)))

    return call


__all__ = ["PageData", "takes_page_data"]
