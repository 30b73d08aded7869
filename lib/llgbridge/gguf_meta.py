"""Tokenizer facts from a GGUF file's key-values (key names and value types from `gguf`).

But: the key-value section is walked here rather than with `gguf.GGUFReader`, which builds a
numpy array per element and takes about 20 s on gemma-4's 262k-token vocab; this walk takes a
fraction of a second, reads scalars and only counts arrays, and names the offset where a
truncated or malformed file stops making sense.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gguf import GGUFValueType, Keys

from .errors import InputError

_scan: Callable[[object, int, int, bool], tuple[int, int, int, int]] | None
try:  # the compiled walk (_llamacall.c); without it (not built yet) the Python one below
    from ._llamacall import scan_strings as _scan
except ImportError:  # pragma: no cover - make setup builds it
    _scan = None

_SCALAR = {
    GGUFValueType.UINT8: "<B",
    GGUFValueType.INT8: "<b",
    GGUFValueType.UINT16: "<H",
    GGUFValueType.INT16: "<h",
    GGUFValueType.UINT32: "<I",
    GGUFValueType.INT32: "<i",
    GGUFValueType.FLOAT32: "<f",
    GGUFValueType.BOOL: "<?",
    GGUFValueType.UINT64: "<Q",
    GGUFValueType.INT64: "<q",
    GGUFValueType.FLOAT64: "<d",
}


@dataclass(frozen=True)
class ArrayInfo:
    type: str
    count: int
    # for the token list only: (index, earlier index) of the first repeated token, and the first
    # token holding a NUL byte; llama.cpp aborts the process on either
    duplicate: tuple[int, int] | None = None
    nul: int | None = None


@dataclass(frozen=True)
class VocabMeta:
    architecture: str | None
    model: str | None  # tokenizer.ggml.model
    pre: str | None  # tokenizer.ggml.pre
    add_space_prefix: bool | None  # tokenizer.ggml.add_space_prefix, None when absent
    bos: int | None  # tokenizer.ggml.bos_token_id
    eos: int | None  # tokenizer.ggml.eos_token_id
    n_tokens: int | None  # len(tokenizer.ggml.tokens)
    n_tensors: int
    version: int

    @property
    def has_tensors(self) -> bool:
        """False for a vocab-only file: it cannot generate."""
        return self.n_tensors > 0


class _Cursor:
    def __init__(self, buf: Any, path: Path) -> None:
        self.buf, self.pos, self.path = buf, 0, path

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise InputError(
                self.path, f"truncated GGUF: {what} at byte {self.pos} needs {n} bytes, file has {len(self.buf)}"
            )
        b = self.buf[self.pos : self.pos + n]
        self.pos += n
        return b

    def unpack(self, fmt: str, what: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))[0]

    def string(self, what: str) -> bytes:
        n = self.unpack("<Q", f"length of {what}")
        return self.take(n, what)


def read_kv(path: Path) -> tuple[dict[str, Any], int, int]:
    """(key -> scalar, string or ArrayInfo; tensor count; version). Raises InputError."""
    path = Path(path)
    try:
        if path.exists() and not path.is_dir() and not path.is_file():  # a FIFO would block the open
            raise InputError(path, "not a regular file (a device, a pipe or a socket), not a GGUF file")
        with path.open("rb") as f:
            if path.stat().st_size == 0:
                raise InputError(path, "empty file")
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as e:
        raise InputError(path, e.strerror or str(e)) from None
    try:
        c = _Cursor(buf, path)
        magic = c.take(4, "magic")
        if magic != b"GGUF":
            raise InputError(path, f"not a GGUF file (starts with {magic!r})")
        version = c.unpack("<I", "version")
        if version not in (2, 3):
            raise InputError(path, f"unsupported GGUF version {version}")
        n_tensors = c.unpack("<Q", "tensor count")
        n_kv = c.unpack("<Q", "key-value count")
        # no sanity cap on n_kv: every key-value consumes at least 12 bytes, so a corrupt count
        # ends in a "truncated" error within len(buf) / 12 iterations
        kv: dict[str, Any] = {}
        for i in range(n_kv):
            key = c.string(f"key #{i}").decode("utf-8", "replace")
            t = c.unpack("<I", f"type of {key}")
            kv[key] = _value(c, t, key)
        return kv, n_tensors, version
    finally:
        buf.close()


def _value(c: _Cursor, t: int, key: str) -> Any:
    try:
        vt = GGUFValueType(t)
    except ValueError:
        raise InputError(c.path, f"corrupt GGUF: key {key!r} has unknown value type {t}") from None
    if vt in _SCALAR:
        return c.unpack(_SCALAR[vt], key)
    if vt == GGUFValueType.STRING:
        return c.string(key).decode("utf-8", "replace")
    if vt == GGUFValueType.ARRAY:
        et = c.unpack("<I", f"element type of {key}")
        n = c.unpack("<Q", f"length of {key}")
        try:
            evt = GGUFValueType(et)
        except ValueError:
            raise InputError(c.path, f"corrupt GGUF: array {key!r} has unknown element type {et}") from None
        if evt in _SCALAR:
            c.take(n * struct.calcsize(_SCALAR[evt]), f"array {key}")
        elif evt == GGUFValueType.STRING:
            if key == Keys.Tokenizer.LIST:
                return _token_list(c, key, n)
            _skip_strings(c, key, n)
        else:
            raise InputError(c.path, f"corrupt GGUF: array {key!r} of {evt.name} is not supported")
        return ArrayInfo(evt.name, n)
    raise InputError(c.path, f"corrupt GGUF: key {key!r} has type {vt.name}")  # pragma: no cover


_U64 = struct.Struct("<Q")


def _strings(c: _Cursor, key: str, n: int, keep: bool) -> list[bytes]:
    """The `n` strings of array `key` from the cursor on (kept only if `keep`), the cursor moved
    past them.

    Why not `c.string` per element: its per-element f-strings and bounds checks made this walk
    most of what `Vocab` spends before llama.cpp's own load (gemma-4's 262k tokens and 515k
    merges: 0.5 s, against 0.09 s here). This loop does only the arithmetic and lets an overrun
    show at the end (offsets only grow, so a string past the end leaves the last offset past it,
    or makes a later `unpack_from` raise); then the slow walk goes over the array again and
    raises its error.
    """
    buf, first = c.buf, c.pos
    unpack_from = _U64.unpack_from
    out: list[bytes] = []
    pos = first
    try:
        if keep:
            # a comprehension, not a loop with append: a tenth off the token list's walk
            out = [buf[(start := pos + 8) : (pos := start + unpack_from(buf, pos)[0])] for _ in range(n)]
        else:
            for _ in range(n):
                pos += 8 + unpack_from(buf, pos)[0]
    except (struct.error, OverflowError):  # a length field past the end, or an offset past any size
        pos = len(buf) + 1
    if pos <= len(buf):
        c.pos = pos
        return out
    c.pos = first
    for j in range(n):
        c.string(f"{key}[{j}]")
    raise AssertionError(f"{key}: the fast walk overran where the slow one did not")  # pragma: no cover


def _skip_strings(c: _Cursor, key: str, n: int) -> None:
    """The cursor moved past the `n` strings of array `key` (the compiled walk where it is built)."""
    end = _scan(c.buf, c.pos, n, False)[0] if _scan is not None else -1
    if end >= 0:
        c.pos = end
    else:  # not built, or an overrun: the Python walk names where
        _strings(c, key, n, keep=False)


def _token_list(c: _Cursor, key: str, n: int) -> ArrayInfo:
    """The token list counted and checked (a repeated token, a NUL byte), the cursor moved past it."""
    if _scan is not None:
        end, repeated, first, nul = _scan(c.buf, c.pos, n, True)
        if end >= 0:
            c.pos = end
            dup = (repeated, first) if repeated >= 0 else None
            return ArrayInfo(GGUFValueType.STRING.name, n, dup, nul if nul >= 0 else None)
    return _token_list_in_python(c, key, n)


def _token_list_in_python(c: _Cursor, key: str, n: int) -> ArrayInfo:
    toks = _strings(c, key, n, keep=True)
    duplicate, nul = None, None
    # whole-list checks first, in C; the per-token walk only where one fails, to name the token
    if len(set(toks)) != n:
        seen: dict[bytes, int] = {}
        for j, tok in enumerate(toks):
            first = seen.setdefault(tok, j)
            if first != j:
                duplicate = (j, first)
                break
    if b"\0" in b"".join(toks):
        nul = next(j for j, tok in enumerate(toks) if b"\0" in tok)
    return ArrayInfo(GGUFValueType.STRING.name, n, duplicate, nul)


def check_tokenizer(path: Path, kv: dict[str, Any]) -> None:
    """Refuse tokenizer key-values that are well-formed but inconsistent, in one line."""
    toks = kv.get(Keys.Tokenizer.LIST)
    if toks is None:
        raise InputError(path, f"no {Keys.Tokenizer.LIST}: not a vocab or model file")
    if not isinstance(toks, ArrayInfo) or toks.type != GGUFValueType.STRING.name:
        raise InputError(path, f"{Keys.Tokenizer.LIST} is not an array of strings")
    for key in (Keys.Tokenizer.SCORES, Keys.Tokenizer.TOKEN_TYPE):
        arr = kv.get(key)
        if isinstance(arr, ArrayInfo) and arr.count != toks.count:
            raise InputError(path, f"inconsistent tokenizer: {toks.count} tokens but {arr.count} entries in {key}")
    if toks.count == 0:
        raise InputError(path, f"inconsistent tokenizer: {Keys.Tokenizer.LIST} is empty")
    if toks.duplicate:
        j, first = toks.duplicate
        raise InputError(
            path, f"inconsistent tokenizer: {Keys.Tokenizer.LIST}[{j}] repeats token {first} (llama.cpp aborts on it)"
        )
    if toks.nul is not None:
        raise InputError(
            path, f"inconsistent tokenizer: {Keys.Tokenizer.LIST}[{toks.nul}] holds a NUL byte (llama.cpp aborts on it)"
        )
    # every special-token id key gguf knows (bos, eos, unk, pad, sep, cls, mask, eot, eom, fim_*)
    ids = [v for k, v in vars(Keys.Tokenizer).items() if k.endswith("_ID") and isinstance(v, str)]
    for key in ids:
        tid = kv.get(key)
        if isinstance(tid, int) and not (0 <= tid < toks.count) and tid not in (-1, 0xFFFFFFFF):
            raise InputError(path, f"inconsistent tokenizer: {key} = {tid} is outside the {toks.count} tokens")


def read_meta(path: Path) -> VocabMeta:
    kv, n_tensors, version = read_kv(path)
    toks = kv.get(Keys.Tokenizer.LIST)
    asp = kv.get(Keys.Tokenizer.ADD_PREFIX)
    return VocabMeta(
        architecture=kv.get(Keys.General.ARCHITECTURE),
        model=kv.get(Keys.Tokenizer.MODEL),
        pre=kv.get(Keys.Tokenizer.PRE),
        add_space_prefix=None if asp is None else bool(asp),
        bos=kv.get(Keys.Tokenizer.BOS_ID),
        eos=kv.get(Keys.Tokenizer.EOS_ID),
        n_tokens=toks.count if isinstance(toks, ArrayInfo) else None,
        n_tensors=n_tensors,
        version=version,
    )
