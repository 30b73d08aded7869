"""An analysis declares what an `ok` result holds as TypedDicts (its result, its rows), and the
check's `Schema` is derived from them (`Schema.of`): a union is the types `isinstance` takes, a key
holding a TypedDict or a list of them is a table of that row's columns, and a type the check
cannot hold is refused where the entry is made. Every registered analysis's derived schema takes
every result the suite has written, and refuses a key or a column of the wrong type."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, NotRequired, TypedDict

import pytest

from llgbridge import analyses, results
from llgbridge.analyses import Analysis, BlankInt, BridgeRow, Ms, Num, Schema


class Step(BridgeRow):
    step: int
    allowed: Annotated[int, "a count"]  # metadata is the reader's, not the check's
    ms: Ms
    seen: BlankInt


class Verdict(TypedDict):
    exact: bool
    note: str | None


class Walk(TypedDict):
    steps: list[Step]
    verdict: Verdict
    literal: str
    limit_s: Num
    extra: list[dict[str, Any]]
    by_bridge: dict[str, int]


def test_a_result_type_becomes_the_schema_it_declares() -> None:
    assert Schema.of(Walk) == Schema(
        {"steps": list, "verdict": dict, "literal": str, "limit_s": (int, float), "extra": list, "by_bridge": dict},
        {
            "steps": {
                "vocab": str,
                "bridge": str,
                "step": int,
                "allowed": int,
                "ms": (int, float, type(None)),
                "seen": (int, str),
            },
            "verdict": {"exact": bool, "note": (str, type(None))},
        },
    )
    # the check names the first key missing: the declared order is kept, a base's columns first
    assert list(Schema.of(Walk).tables["steps"]) == ["vocab", "bridge", "step", "allowed", "ms", "seen"]


class Maybe(TypedDict):
    rows: list[BridgeRow]
    seconds: NotRequired[float]


class Partial(TypedDict, total=False):
    rows: list[BridgeRow]


class Loose(TypedDict):
    rows: Any


@pytest.mark.parametrize(
    ("typed", "says"),
    [
        (Maybe, "['seconds'] may be absent"),
        (Partial, "['rows'] may be absent"),
        (Loose, "Loose.rows: typing.Any is no JSON type"),
        (dict, "is not a TypedDict"),
    ],
)
def test_a_type_the_check_cannot_hold_is_refused_where_the_entry_is_made(typed: type, says: str) -> None:
    with pytest.raises(TypeError, match=says.replace("[", r"\[").replace("]", r"\]")):
        Analysis("loose", (), typed, runs_on="every", whatif=False)


def test_an_entry_carries_the_schema_of_its_result_type() -> None:
    a = Analysis("walk", (), Walk, runs_on="every", whatif=False)
    assert a.schema == Schema.of(Walk) and results.SCHEMAS["leak"] == analyses.BY_NAME["leak"].schema


WRONG = ("x", 1, 1.5, True, [], {}, None)  # one of each JSON type


def _kinds(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _right(kind: type | tuple[type, ...]) -> Any:
    return next(v for v in WRONG if type(v) in _kinds(kind))


def _wrong(kind: type | tuple[type, ...]) -> Any:
    return next(v for v in WRONG if type(v) not in _kinds(kind))


def _smallest(analysis: str) -> dict[str, Any]:
    """The least an `ok` result of `analysis` holds, by its schema: one row per table."""
    schema = results.SCHEMAS[analysis]
    r: dict[str, Any] = {"status": "ok", "notebook": analysis, "vocab": "v"}
    for key, kind in schema.keys.items():
        r[key] = _right(kind)
    for key, cols in schema.tables.items():
        row = {c: _right(k) for c, k in cols.items()}
        r[key] = [row] if r[key] == [] else row
    return r


@pytest.mark.parametrize("analysis", analyses.names())
def test_the_derived_schema_takes_its_smallest_result_and_refuses_each_wrong_type(analysis: str) -> None:
    schema = results.SCHEMAS[analysis]
    assert results.why_unusable(analysis, "v", _smallest(analysis)) == ""
    for key, kind in schema.keys.items():
        r = _smallest(analysis)
        r[key] = _wrong(kind)
        assert results.why_unusable(analysis, "v", r).startswith(f"{key} is "), key
    for key, cols in schema.tables.items():
        for c, kind in cols.items():
            r = _smallest(analysis)
            row = r[key][0] if isinstance(r[key], list) else r[key]
            row[c] = _wrong(kind)
            assert f".{c} is " in results.why_unusable(analysis, "v", r), (key, c)


def test_every_result_the_suite_wrote_passes_the_derived_schemas(made_results: Path) -> None:
    """The results under data/results were written through the hand-kept schemas before they were
    derived (`nb.write_result` checks what it writes): the derived ones take every one of them, and
    one `ok` result of every analysis made afresh for the session (`made_results`)."""
    made = [p for a in analyses.names() for p in (made_results / a).glob("*.json")]
    files = sorted(made + [p for a in analyses.names() for p in (results.RESULTS / a).glob("*.json")])
    ok = {p.parent.name for p in made if json.loads(p.read_text(encoding="utf-8")).get("status") == "ok"}
    assert ok == set(analyses.names()), sorted(set(analyses.names()) - ok)
    refused = []
    for p in files:
        r = json.loads(p.read_text(encoding="utf-8"))
        if r.get("status") == "ok" and (why := results.why_unusable(p.parent.name, p.stem, r)):
            refused.append(f"{p.parent.name}/{p.name}: {why}")
    assert refused == []
