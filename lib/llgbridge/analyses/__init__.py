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
import sys
import traceback
from pathlib import Path

from .registry import INPUT_SETS, Analysis, BlankInt, BridgeRow, EntryError, Kind, Ms, Num, Schema

EXTRA = "LLGBRIDGE_ANALYSES"


def _raised(e: BaseException) -> str:
    """What importing a package raised, in one line: its type, message and the line that raised it."""
    tb = traceback.extract_tb(e.__traceback__)
    where = f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else 'no message'}{where}"


def _entry(package: str) -> Analysis:
    """The entry of `package`, told where it was found; EntryError, one line, when there is none."""
    try:
        module = importlib.import_module(package)
    except ModuleNotFoundError as e:
        if e.name and (package == e.name or package.startswith(e.name + ".")):  # the package itself, not one it imports
            raise EntryError(f"{package}: no such package on the Python path ({e})") from None
        raise EntryError(f"{package}: importing it raised {_raised(e)}") from None
    except EntryError as e:  # its entry, made as it was imported, refused (`Analysis`)
        raise EntryError(f"{package}: {e}") from None
    except Exception as e:  # noqa: BLE001 - whatever an outside package raises is its one line
        raise EntryError(f"{package}: importing it raised {_raised(e)}") from None
    entry = getattr(module, "ANALYSIS", None)
    if not isinstance(entry, Analysis):
        raise EntryError(f"{package}: no ANALYSIS entry (an llgbridge.analyses.Analysis) in its __init__.py")
    return dataclasses.replace(entry, package=package, folder=Path(module.__file__ or "").parent)


def discover(extra: str = "") -> tuple[Analysis, ...]:
    """Every package here, then those `extra` names, in a worker's order (`order`, then name).
    EntryError, one line naming the package and the cause, for one the registry cannot take."""
    packages = [f"{__name__}.{m.name}" for m in pkgutil.iter_modules(__path__) if m.ispkg]
    packages += [p.strip() for p in extra.split(",") if p.strip()]
    found: dict[str, Analysis] = {}
    for p in packages:
        a = _entry(p)
        if a.name in found:
            raise EntryError(f"{p}: its analysis is named {a.name!r}, as {found[a.name].package}'s is")
        found[a.name] = a
    return tuple(sorted(found.values(), key=lambda a: (a.order, a.name)))


try:
    ANALYSES: tuple[Analysis, ...] = discover(os.environ.get(EXTRA, ""))
except EntryError as e:
    # every command imports the registry before its own code runs: the one line is said here, and the
    # process ends as a refused command line does (exit 2), before anything ran
    print(f"{EXTRA}: {e}", file=sys.stderr)
    raise SystemExit(2) from None
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
    "EntryError",
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
