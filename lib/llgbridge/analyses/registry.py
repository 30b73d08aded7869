"""What an analysis's entry declares (`Analysis`), and what an `ok` result holds (`Schema`).

Standard library only: the Makefile's helpers and the pool's planner read the entries before any
analysis's own code (numpy, llama.cpp) is imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..paths import ROOT

Kind = type | tuple[type, ...]  # a JSON type, or several (`isinstance`'s second argument)


@dataclass(frozen=True)
class Schema:
    keys: dict[str, Kind]  # top-level key -> JSON type (list, dict, str, int, float)
    tables: dict[
        str, dict[str, Kind]
    ]  # key holding a list of rows (or one row) -> column each row has -> its JSON type


NUM = (int, float)
BRIDGE_ROW: dict[str, Kind] = {"vocab": str, "bridge": str}
MS = (int, float, type(None))  # a timing: none where nothing was timed
BLANK_INT = (int, str)  # a count, or "" where it was not measured (the native differential that did not run)

# the inputs `make report` runs an analysis on, as the Makefile passes them to the pool
INPUT_SETS = {
    "every": "every fixture and every real model's vocab",
    "matrix": "the synthetic models made from MATRIX_VOCABS' tokenizers, and the real models",
    "server": "the matrix's models, through the real llama-server",
    "corpus-sample": "the corpus's seeded sample of schemas, on CORPUS_SAMPLE_VOCABS",
}


@dataclass(frozen=True)
class Analysis:
    name: str  # its notebook's and its results folder's name
    # what its result depends on beyond results.SHARED_CODE: the code version a result records is their
    # hash with its notebook's; a name ending in "/" is every module of that subpackage
    modules: tuple[str, ...]
    schema: Schema
    runs_on: str  # a key of INPUT_SETS
    whatif: bool  # `make whatif` runs it on a new file
    # the compiled programs (or data) a result ran, by directory and glob: their bytes are part of
    # its code version, so a rebuilt binary (a changed harness, a patch, another llguidance) or an
    # edited corpus schema makes it stale
    built: tuple[tuple[str, str], ...] = ()
    # the libraries it drives beyond results.VERSIONED_PACKAGES (the engines'): their installed
    # versions are recorded with its results, and another version makes them stale
    packages: tuple[str, ...] = ()
    # where it comes in `make report`'s worker (an input's analyses, lowest first) and on the page
    # (the report's own sections, report.pages.OWN_SECTIONS, sit between them by the same numbers)
    order: int = 100
    page: int = 1000
    # it loads a model with N_GPU_LAYERS: on a Dask cluster its runs ask for a GPU worker (`remote`)
    gpu: bool = False
    # its notebook, relative to its package's folder; None is the repository's notebooks/NAME.ipynb
    notebook: str | None = None
    # filled in by the registry (`llgbridge.analyses`) from where the entry was found
    package: str = ""
    folder: Path = Path()

    @property
    def section_module(self) -> str:
        """The section's module (its package's `section.py`, whose `NAME_section` draws it; its prose is
        `NAME.md.j2` beside it), as `importlib` takes it."""
        return f"{self.package}.section"

    @property
    def notebook_path(self) -> Path:
        return self.folder / self.notebook if self.notebook else ROOT / "notebooks" / f"{self.name}.ipynb"
