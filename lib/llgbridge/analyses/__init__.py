"""The analyses: one package each, and the one registry every other place reads.

An analysis is a package here, `analyses/NAME/`: its `__init__.py` holds its entry (`ANALYSIS`,
an `Analysis`: what its result's code version hashes, what an `ok` result holds (a `TypedDict`,
its rows TypedDicts too, from which the check's `Schema` is derived), which inputs `make report`
runs it on, whether `make whatif` does, its place in a worker's order and on the page); beside
it, its compute (`compute.py`, more modules where it needs them), its report section
(`section.py`, `NAME_section`) and the section's prose (`NAME.md.j2`). Its notebook is
`notebooks/NAME.ipynb` (or the one its entry names). The pool, the Makefile's report target, the
results loader, the what-if, the page and the tests read `ANALYSES` and nothing else.

Adding an analysis is a new package here, its notebook and its test: no other file changes
(tests/test_toy_analysis.py adds one from a temporary folder and follows it to the page).
Packages outside this folder join the registry by name in `LLGBRIDGE_ANALYSES` (comma-separated
importable packages, each with an `ANALYSIS`): how a reviewer tries an analysis of their own.

Standard library only: an entry imports nothing but `registry`, so the registry loads before the
venv's packages do.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import pkgutil
from pathlib import Path

from .registry import INPUT_SETS, Analysis, BlankInt, BridgeRow, Kind, Ms, Num, Schema

EXTRA = "LLGBRIDGE_ANALYSES"


def _entry(package: str) -> Analysis:
    """The entry of `package`, told where it was found."""
    module = importlib.import_module(package)
    entry = getattr(module, "ANALYSIS", None)
    if not isinstance(entry, Analysis):
        raise ImportError(f"{package}: no ANALYSIS entry (an llgbridge.analyses.Analysis) in its __init__.py")
    return dataclasses.replace(entry, package=package, folder=Path(module.__file__ or "").parent)


def discover(extra: str = "") -> tuple[Analysis, ...]:
    """Every package here, then those `extra` names, in a worker's order (`order`, then name)."""
    packages = [f"{__name__}.{m.name}" for m in pkgutil.iter_modules(__path__) if m.ispkg]
    packages += [p.strip() for p in extra.split(",") if p.strip()]
    found = [_entry(p) for p in packages]
    names = [a.name for a in found]
    if len(set(names)) != len(names):
        raise ImportError(f"two analyses share a name: {sorted(n for n in set(names) if names.count(n) > 1)}")
    return tuple(sorted(found, key=lambda a: (a.order, a.name)))


ANALYSES: tuple[Analysis, ...] = discover(os.environ.get(EXTRA, ""))
BY_NAME = {a.name: a for a in ANALYSES}


def names(runs_on: str | None = None, whatif: bool | None = None) -> tuple[str, ...]:
    """The analyses' names, in the registry's order, those that run on `runs_on` or in a what-if."""
    return tuple(
        a.name for a in ANALYSES if (runs_on is None or a.runs_on == runs_on) and (whatif is None or a.whatif == whatif)
    )


__all__ = [
    "ANALYSES",
    "BY_NAME",
    "EXTRA",
    "INPUT_SETS",
    "Analysis",
    "BlankInt",
    "BridgeRow",
    "Kind",
    "Ms",
    "Num",
    "Schema",
    "discover",
    "names",
]
