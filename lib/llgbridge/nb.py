"""Helpers the notebooks share: parameter checks, loading, building bridges, writing results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import InputError
from .paths import resolve, vocab_path, write_json
from .show import show
from .vocab import Vocab


def check_param(name: str, value: Any, kind: type | tuple[type, ...]) -> None:
    """A notebook parameter of the wrong type is a one-line error naming it."""
    if not isinstance(value, kind):
        want = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise InputError(f"parameter {name}", f"expected {want}, got {type(value).__name__} {value!r}")


def load_vocab(vocab: str, path: str = "") -> Vocab:
    check_param("vocab", vocab, str)
    check_param("vocab_path", path, str)
    p = vocab_path(vocab, path)
    return Vocab(p, name=vocab)


def result_path(results_dir: str, analysis: str, vocab: str) -> Path:
    return resolve(results_dir) / analysis / f"{vocab}.json"


def write_result(results_dir: str, analysis: str, vocab: str, payload: dict[str, Any]) -> None:
    """The tidy result of one (analysis, vocab) run; `status: ok` marks it complete.

    It is checked against `results.SCHEMAS` first, so a notebook cannot write what the report
    would refuse to read.
    """
    from .results import check

    record = {"status": "ok", "notebook": analysis, "vocab": vocab, **payload}
    why = check(analysis, vocab, record)
    if why:
        raise InputError(f"{analysis} result for {vocab}", f"does not match its schema: {why}")
    write_json(result_path(results_dir, analysis, vocab), record)


def show_bytes(b: bytes) -> str:
    """A piece as a reviewer reads it (`show.show`): quoted, spaces and invalid bytes visible."""
    return show(b)


def build_bridges(v: Vocab, names: list[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """(built bridges by name, build errors by name): a bridge that cannot be built for a vocab
    is a result (its one-line reason), not a crash of the notebook."""
    from . import bridges as B

    check_param("bridges", names, list)
    # an unknown name is the caller's error, not a bridge that cannot be built: checked first
    classes = {name: B.variant(name) for name in names}
    built, errors = {}, {}
    for name, cls in classes.items():
        try:
            built[name] = cls(v)
        except InputError as e:
            errors[name] = e.cause
    return built, errors


def failed_rows(vocab: str, errors: dict[str, str]) -> list[dict[str, Any]]:
    from .bridges import failed_rows as rows

    return rows(vocab, errors)
