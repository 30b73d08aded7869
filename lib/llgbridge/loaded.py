"""The input files this process loaded, as their bytes were when it loaded them.

A result records its inputs' sha256 (`results.provenance`), and `results.why_stale` calls it
current while the files still hash the same. Hashed when the result is written, a file replaced
while the analysis ran was recorded with the new bytes although the result was computed from the
old ones, and it stood as current. So every loader notes the file here before it reads it
(`note`) and confirms after (`confirm`: the same file, size and date); `results.provenance`
records the noted hash and refuses to write a result whose input no longer has it.

Stdlib only: `vocab`, `generate`, `synth` and `results` all call it.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from .errors import InputError

# resolved path -> (sha256, (device, inode, size, mtime_ns)) when this process loaded it
_SEEN: dict[str, tuple[str, tuple[int, int, int, int]]] = {}


def _stat(path: Path) -> tuple[int, int, int, int]:
    st = path.stat()
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def sha256(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def note(path: str | os.PathLike[str]) -> str:
    """The sha256 of `path` now, remembered as the bytes this process loads from it (call it
    just before the load); a file noted before and unchanged since is not read again."""
    p = Path(path).resolve()
    st = _stat(p)
    seen = _SEEN.get(str(p))
    if seen is not None and seen[1] == st:
        return seen[0]
    digest = sha256(p)
    if _stat(p) != st:
        raise InputError(path, "changed while it was being read; run again once nothing writes it")
    _SEEN[str(p)] = (digest, st)
    return digest


def confirm(path: str | os.PathLike[str]) -> None:
    """After a load: the file is still the one `note` hashed (same inode, size and date)."""
    p = Path(path).resolve()
    seen = _SEEN.get(str(p))
    try:
        same = seen is not None and _stat(p) == seen[1]
    except OSError:
        same = False
    if not same:
        _SEEN.pop(str(p), None)
        raise InputError(path, "changed while it was being loaded; run again once nothing writes it")


def at_load(path: str | os.PathLike[str]) -> str | None:
    """The sha256 `path` had when this process noted it, or None when it never did."""
    seen = _SEEN.get(str(Path(path).resolve()))
    return seen[0] if seen else None
