"""Errors that name the input and the cause in one line."""

from __future__ import annotations

import os
from pathlib import Path


def _shown(what: str | os.PathLike[str]) -> str:
    """A path inside the repository is shown relative to it: reports must not carry this machine's paths."""
    from .paths import ROOT

    if isinstance(what, os.PathLike) or str(what).startswith("/"):
        try:
            return str(Path(what).resolve().relative_to(ROOT))
        except ValueError:
            return str(what)
    return str(what)


class InputError(ValueError):
    """An input (file, grammar, parameter) the suite cannot use; `str()` is one line."""

    def __init__(self, what: str | os.PathLike[str], cause: str) -> None:
        self.what = _shown(what)
        self.cause = cause
        super().__init__(f"{self.what}: {cause}")


class LlgError(RuntimeError):
    """An error reported by llguidance itself (its message, verbatim)."""


def first_line(msg: str | None) -> str:
    """The first line of a message, surrounding blank lines dropped: an error shown in one line."""
    text = (msg or "").strip()
    return text.splitlines()[0] if text else ""
