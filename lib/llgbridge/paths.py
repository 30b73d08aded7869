"""Where things live, resolved against the repository root so notebooks run from anywhere."""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from .catalogue import REAL_MODELS

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"
VOCABS = DATA / "vocabs"
RESULTS = DATA / "results"
MODELS = DATA / "models"  # the real models, fetched (`models`)
REPORTS = ROOT / "reports"


def resolve(p: str | os.PathLike[str]) -> Path:
    p = Path(p)
    return p if p.is_absolute() else ROOT / p


FIXTURE_PREFIX, FIXTURE_SUFFIX = "ggml-vocab-", ".gguf"  # llama.cpp's models/ggml-vocab-NAME.gguf


def vocab_path(vocab: str, vocab_path: str = "") -> Path:
    """A fixture's short name (`llama-spm`), a real model's (`smollm2-135m`: its file in
    data/models/, whose vocab every analysis loads without its weights) or an explicit path to
    any GGUF file."""
    if vocab_path:
        return resolve(vocab_path)
    if vocab in REAL_MODELS:
        return MODELS / REAL_MODELS[vocab].file
    return VOCABS / f"{FIXTURE_PREFIX}{vocab}{FIXTURE_SUFFIX}"


# an input's name becomes a file name (data/results/ANALYSIS/NAME.json), a Make target and a
# command-line argument: letters, digits, `.`, `_`, `+`, `-`, not starting with `-` or `.` (an
# option to argparse, a hidden file or `..`), and nothing Make or a shell reads as syntax
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")


def usable_name(text: str) -> str:
    """`text` with every character an input name cannot hold replaced by `_` (the caller trims
    the length and the first character)."""
    return re.sub(r"[^A-Za-z0-9._+-]", "_", text)


def name_problem(name: object) -> str:
    """Why `name` cannot name an input, or "" when it can."""
    if not isinstance(name, str):
        return f"expected a name (text), got {type(name).__name__} {name!r}"
    if _SAFE_NAME.fullmatch(name):
        return ""
    return (
        f"{name!r} is not a usable input name (letters, digits, '.', '_', '+' and '-', at most 128, starting with a "
        f"letter or digit)"
    )


def vocab_name(path: str | os.PathLike[str]) -> str:
    """`ggml-vocab-llama-spm.gguf` -> `llama-spm`; any other file keeps its name less `.gguf`.

    The inverse of `vocab_path`, and the one place a file name becomes a vocab name (the
    fixtures' names, `fixtures.vocab_names`, and so `inputsets`' VOCABS).
    """
    name = Path(path).name.removesuffix(FIXTURE_SUFFIX)
    return name.removeprefix(FIXTURE_PREFIX)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: Path, data: bytes | str) -> None:
    """Write to a temporary name beside `path`, then rename: never a truncated file.

    The file gets the mode a plain `open()` would give it (0666 less the umask): mkstemp's
    0600 would otherwise survive the rename and lock readers out of the reports.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            os.fchmod(f.fileno(), 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, obj: Any) -> None:
    write_atomic(path, json.dumps(obj, indent=1, ensure_ascii=False) + "\n")
