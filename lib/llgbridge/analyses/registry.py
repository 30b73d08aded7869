"""What an analysis's entry declares (`Analysis`), and what an `ok` result holds (`Schema`, derived
from the entry's `TypedDict` of its result).

Standard library only: the Makefile's helpers and the pool's planner read the entries before any
analysis's own code (numpy, llama.cpp) is imported.
"""

from __future__ import annotations

import re
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import (
    Annotated,
    Any,
    NotRequired,
    Required,
    TypeAlias,
    TypedDict,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

from ..paths import ROOT

Kind = type | tuple[type, ...]  # a JSON type, or several (`isinstance`'s second argument)


class BridgeRow(TypedDict):
    """A row of one bridge on one vocab."""

    vocab: str
    bridge: str


Num: TypeAlias = int | float
Ms: TypeAlias = int | float | None  # a timing: none where nothing was timed
BlankInt: TypeAlias = int | str  # a count, or "" where it was not measured (the native differential that did not run)

_JSON = (str, int, float, bool, list, dict, type(None))  # what json.loads makes; the check knows no other type


@dataclass(frozen=True)
class Schema:
    keys: dict[str, Kind]  # top-level key -> JSON type (list, dict, str, int, float)
    tables: dict[
        str, dict[str, Kind]
    ]  # key holding a list of rows (or one row) -> column each row has -> its JSON type

    @classmethod
    def of(cls, result: type) -> Schema:
        """What `result` (a TypedDict) declares an `ok` result holds: each key and its JSON type(s);
        a key whose type is a TypedDict, or a list of one, is a table of that row type's columns."""
        keys: dict[str, Kind] = {}
        tables: dict[str, dict[str, Kind]] = {}
        for key, hint in _fields(result).items():
            keys[key] = _kind(hint, f"{result.__name__}.{key}")
            if (row := _row_type(hint)) is not None:
                tables[key] = {c: _kind(h, f"{row.__name__}.{c}") for c, h in _fields(row).items()}
        return cls(keys, tables)


def _fields(typed: type) -> dict[str, Any]:
    """A TypedDict's keys and their annotations, in the order declared (a base's first)."""
    if not is_typeddict(typed):
        raise TypeError(f"{typed!r} is not a TypedDict: an analysis's result and its rows are declared as one")
    hints = get_type_hints(typed, include_extras=True)
    # read from the annotations: under `from __future__ import annotations` Python 3.11's
    # __required_keys__ misses a NotRequired
    total_false: frozenset[str] = getattr(typed, "__optional_keys__", frozenset())  # `total=False` classes' keys
    optional = [
        k
        for k, h in hints.items()
        if get_origin(h) is NotRequired or (k in total_false and get_origin(h) is not Required)
    ]
    if optional:
        raise TypeError(
            f"{typed.__name__}: {optional} may be absent, but the check requires every key a result type names "
            "(a key it should not hold is left out of the type)"
        )
    return {k: get_args(h)[0] if get_origin(h) is Required else h for k, h in hints.items()}


def _bare(hint: Any) -> Any:
    """`hint` without its `Annotated` metadata."""
    return get_args(hint)[0] if get_origin(hint) is Annotated else hint


def _kinds(hint: Any, where: str) -> tuple[type, ...]:
    hint = _bare(hint)
    if get_origin(hint) in (Union, types.UnionType):
        return tuple(k for a in get_args(hint) for k in _kinds(a, where))
    bare = get_origin(hint) or hint
    if is_typeddict(bare):
        return (dict,)
    if bare in _JSON:
        return (bare,)
    raise TypeError(f"{where}: {hint!r} is no JSON type (str, int, float, bool, None, list, dict, a TypedDict)")


def _kind(hint: Any, where: str) -> Kind:
    """The JSON type(s) a value annotated `hint` may have, as `isinstance` takes them."""
    kinds = _kinds(hint, where)
    return kinds[0] if len(kinds) == 1 else kinds


def _row_type(hint: Any) -> type | None:
    """The TypedDict of a key's rows: the key's own type, or its list's items' (None for neither)."""
    hint = _bare(hint)
    if get_origin(hint) is list and get_args(hint):
        hint = _bare(get_args(hint)[0])
    return hint if is_typeddict(hint) else None


# the input sets `make report` runs an analysis on, by name (the names in each: `inputsets`)
INPUT_SETS = {
    "every": "every fixture and every real model's vocab",
    "matrix": "the synthetic models made from MATRIX_VOCABS' tokenizers, and the real models",
    "server": "the matrix's models, through the real llama-server",
    "corpus-sample": "the corpus's seeded sample of schemas, on CORPUS_SAMPLE_VOCABS",
}


# an analysis's name is a folder under the results (RESULTS/NAME/), a notebook's file name, a CSV's
# and the prefix of its section's function (NAME_section): so an identifier, in lower case, that
# no path can climb out of
_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")


class EntryError(ValueError):
    """An analysis's entry that the registry cannot take; `str()` is one line."""


@dataclass(frozen=True)
class Analysis:
    name: str  # its notebook's and its results folder's name
    # what its result depends on beyond results.SHARED_CODE: the code version a result records is their
    # hash with its notebook's; a name ending in "/" is every module of that subpackage
    modules: tuple[str, ...]
    # what an `ok` result holds, as a TypedDict (its rows as TypedDicts too): `schema` is derived from it
    result: type
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
    schema: Schema = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise EntryError(
                f"name {self.name!r} is not an analysis name (a lower-case letter, then lower-case letters, digits "
                "and '_', at most 64): it names its results folder and its notebook"
            )
        # a set the planner does not know would run it on no input, and nothing would say so
        if self.runs_on not in INPUT_SETS:
            raise EntryError(
                f"{self.name}: runs_on {self.runs_on!r} is no input set; the registry's are {', '.join(INPUT_SETS)}"
            )
        # derived at once, so a result type the check cannot hold fails where the registry loads
        object.__setattr__(self, "schema", Schema.of(self.result))

    @property
    def section_module(self) -> str:
        """The section's module (its package's `section.py`, whose `NAME_section` draws it; its prose is
        `NAME.md.j2` beside it), as `importlib` takes it."""
        return f"{self.package}.section"

    @property
    def notebook_path(self) -> Path:
        return self.folder / self.notebook if self.notebook else ROOT / "notebooks" / f"{self.name}.ipynb"
