"""Errors that name the input and the cause in one line."""

from __future__ import annotations

import os
from pathlib import Path

from .paths import ROOT


def _shown(what: str | os.PathLike[str]) -> str:
    """A path inside the repository is shown relative to it: reports must not carry this machine's paths."""
    if isinstance(what, os.PathLike) or str(what).startswith("/"):
        try:
            return str(Path(what).resolve().relative_to(ROOT))
        except (ValueError, OSError, RuntimeError):  # outside the repository, or a link loop: shown as given
            return str(what)
    return str(what)


class InputError(ValueError):
    """An input (file, grammar, parameter) the suite cannot use; `str()` is one line."""

    def __init__(self, what: str | os.PathLike[str], cause: str) -> None:
        self.what = _shown(what)
        self.cause = cause
        super().__init__(f"{self.what}: {cause}")

    def _render_traceback_(self) -> list[str]:
        # IPython's hook for how an exception is shown: a notebook run in JupyterLab with a mistyped
        # input showed a 41-line traceback where the README promises one line
        return [f"InputError: {self}"]


class Refused(Exception):
    """A command line refused before anything ran: the message goes to stderr, the exit is 2."""


class LlgError(RuntimeError):
    """An error reported by llguidance itself (its message, verbatim)."""


def first_line(msg: str | None) -> str:
    """The first line of a message, surrounding blank lines dropped: an error shown in one line."""
    text = (msg or "").strip()
    return text.splitlines()[0] if text else ""


# llguidance's stop reasons, which it reports as a bare word followed by a dump of its state
_LLG_STOPS = {
    "NoExtensionBias": "no token of this vocab can continue the grammar",
    "NoExtension": "the grammar cannot be continued",
    "MaxTokensTotal": "the token limit was reached",
    "LexerTooComplex": "the grammar's lexer is too complex",
    "ParserTooComplex": "the grammar is too complex to parse",
    "InternalError": "an internal error",
}


def cause_line(msg: str | None) -> str:
    """The line of a (possibly long) native error that says why: its first line, with
    llguidance's bare stop reasons spelled out; the state dump and any backtrace dropped."""
    line = first_line(msg)
    word = line.strip().rstrip(".")
    if word in _LLG_STOPS:
        return f"{_LLG_STOPS[word]} (llguidance stopped: {word})"
    return line
