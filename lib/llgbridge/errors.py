"""Errors that name the input and the cause in one line."""

from __future__ import annotations

import os


class InputError(ValueError):
    """An input (file, grammar, parameter) the suite cannot use; `str()` is one line."""

    def __init__(self, what: str | os.PathLike[str], cause: str) -> None:
        self.what = str(what)
        self.cause = cause
        super().__init__(f"{self.what}: {cause}")


class LlgError(RuntimeError):
    """An error reported by llguidance itself (its message, verbatim)."""
