"""A llama.cpp vocab, loaded through llama-cpp-python, with the conversions the bridge uses.

Names follow `include/llama.h` (`token_to_piece`, `detokenize`, `tokenize`, `lstrip`,
`add_special`, `parse_special`) so a reader can grep upstream for each call.

Loading a vocab-only GGUF costs well under a second; every conversion is one C call.
`piece_detok_differences` walks a whole vocab at close to C speed (the census's hot loop).
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
import weakref
from array import array
from collections.abc import Iterable, Iterator
from functools import cached_property
from pathlib import Path
from typing import Any

import llama_cpp

from . import loaded
from .errors import InputError
from .gguf_meta import check_tokenizer, read_kv
from .modelfile import ModelFile
from .overrides import Override, check_log, parse_all
from .paths import vocab_name

VOCAB_TYPES = {0: "NONE", 1: "SPM", 2: "BPE", 3: "WPM", 4: "UGM", 5: "RWKV", 6: "PLAMO2"}

# mirrors the size that common/llguidance.cpp gives one token's piece
MAX_PIECE = 1024

# the per-token calls (token_to_piece, detokenize) go through a compiled binding: llama-cpp-python's
# ctypes bindings cost about 0.2 us of marshalling per call, eight times the call itself, and a
# whole-vocab pass makes millions (_llamacall.c says more; `make bench` measures both)
try:
    from . import _llamacall as _call
except ImportError as e:  # pragma: no cover - make setup builds it
    raise ImportError(
        f"llgbridge._llamacall is not built ({e}): run `make setup` (python -m llgbridge.cbuild)"
    ) from None


# llama.cpp's own error lines from the last load, so a refusal can say why in one line
_LOAD_ERRORS: list[str] = []
_LOG_ERROR = 4  # GGML_LOG_LEVEL_ERROR
# what its loader said about key overrides during the last load (`overrides.check_log` reads it)
_OVERRIDE_LOG: list[str] = []


def _capture_llama_log() -> None:
    """llama.cpp logs every load to stderr: keep notebooks quiet, but keep its errors."""
    echo = bool(os.environ.get("LLGBRIDGE_LLAMA_LOG"))

    @llama_cpp.llama_log_callback
    def _log(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:  # pragma: no cover
        if level == _LOG_ERROR:
            _LOAD_ERRORS.append(text.decode("utf-8", "replace").strip())
        if b"metadata override" in text:
            _OVERRIDE_LOG.append(text.decode("utf-8", "replace"))
        if echo:
            sys.stderr.write(text.decode("utf-8", "replace"))

    # keep a reference: llama.cpp stores the pointer
    _capture_llama_log.cb = _log  # type: ignore[attr-defined]
    llama_cpp.llama_log_set(_log, ctypes.c_void_p(0))


def _load_failure(path: Path, checked: bool = False) -> InputError:
    """Why llama.cpp refused `path`: a structural check first (unless the caller `checked` it
    just before the load), else llama.cpp's own words."""
    try:
        if not checked:
            kv, _, _ = read_kv(path)
            check_tokenizer(path, kv)
    except InputError as e:
        return e
    said = [ln for ln in _LOAD_ERRORS if "error loading model:" in ln] or _LOAD_ERRORS
    if said:
        cause = said[0].split("error loading model:", 1)[-1].strip()
        for prefix in ("error loading model vocabulary:", "llama_model_loader:"):
            cause = cause.removeprefix(prefix).strip()
        return InputError(path, f"llama.cpp cannot load it: {cause}")
    return InputError(path, "llama.cpp cannot load it (run with LLGBRIDGE_LLAMA_LOG=1 to see its log)")


_capture_llama_log()
llama_cpp.llama_backend_init()

GGUF_MAGIC = b"GGUF"


def check_gguf_file(path: Path) -> None:
    """Refuse what is plainly not a GGUF file, before llama.cpp sees it."""
    try:
        path.stat()
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise InputError(path, "a loop of symbolic links: it names no file") from None
    if not path.exists():
        raise InputError(path, "no such file")
    if path.is_dir():
        raise InputError(path, "is a directory, not a GGUF file")
    if not path.is_file():  # opening a FIFO would block, and /dev/zero has no size
        raise InputError(path, "not a regular file (a device, a pipe or a socket), not a GGUF file")
    size = path.stat().st_size
    if size == 0:
        raise InputError(path, "empty file")
    with path.open("rb") as f:
        magic = f.read(4)
    if magic != GGUF_MAGIC:
        raise InputError(path, f"not a GGUF file (starts with {magic!r}, expected b'GGUF')")


def kv_override_array(ovs: tuple[Override, ...]) -> Any:
    """`llama_model_params.kv_overrides`: the overrides and a zeroed sentinel (an empty key ends
    the list); None without overrides. The caller keeps it alive while the model loads."""
    if not ovs:
        return None
    arr = (llama_cpp.llama_model_kv_override * (len(ovs) + 1))()
    tags = {
        "int": llama_cpp.LLAMA_KV_OVERRIDE_TYPE_INT,
        "float": llama_cpp.LLAMA_KV_OVERRIDE_TYPE_FLOAT,
        "bool": llama_cpp.LLAMA_KV_OVERRIDE_TYPE_BOOL,
        "str": llama_cpp.LLAMA_KV_OVERRIDE_TYPE_STR,
    }
    for slot, o in zip(arr, ovs):
        slot.key = o.key.encode()
        slot.tag = tags[o.type]
        if o.type == "int":
            slot.value.val_i64 = int(o.value)
        elif o.type == "float":
            slot.value.val_f64 = float(o.value)
        elif o.type == "bool":
            slot.value.val_bool = bool(o.value)
        else:
            slot.value.val_str = str(o.value).encode()
    return arr


class Vocab:
    """A llama.cpp vocab loaded with `vocab_only`, kept alive as long as this object.

    `overrides` are llama.cpp's key overrides (`KEY=TYPE:VALUE`, `overrides.parse`), given to the
    loader as `llama_model_params.kv_overrides`, as `--override-kv` gives them; one llama.cpp did
    not take is refused in one line (`overrides.check_log`)."""

    def __init__(
        self,
        path: str | os.PathLike[str] | ModelFile,
        name: str | None = None,
        overrides: Iterable[str | Override] = (),
    ) -> None:
        self.path = path.path if isinstance(path, ModelFile) else Path(path)
        self.name = name or vocab_name(self.path)
        self.overrides = parse_all(overrides)
        # before llama.cpp sees it: an out-of-range EOS id or a scores array longer than the token
        # list loads there without complaint and then skews every analysis. The header is read
        # once a process (`modelfile`): a file given as its value, or read before, is not read again
        if not isinstance(path, ModelFile):
            check_gguf_file(self.path)
        (path if isinstance(path, ModelFile) else ModelFile.read(self.path)).require_tokenizer()
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        kv = kv_override_array(self.overrides)
        if kv is not None:
            params.kv_overrides = kv
        _LOAD_ERRORS.clear()
        _OVERRIDE_LOG.clear()
        loaded.note(self.path)
        model = llama_cpp.llama_model_load_from_file(str(self.path).encode(), params)
        del kv  # the loader copied the overrides into its own map
        if not model:
            why = _load_failure(self.path, checked=True)
            if self.overrides:  # the override may be the reason: it is named with llama.cpp's
                raise InputError(f"{self.path.name} with {', '.join(o.text for o in self.overrides)}", why.cause)
            raise why
        try:
            loaded.confirm(self.path)
            if self.overrides:
                check_log(self.overrides, "".join(_OVERRIDE_LOG), self.path.name, vocab_only=True)
        except InputError:
            llama_cpp.llama_model_free(model)
            raise
        self._model = model
        weakref.finalize(self, llama_cpp.llama_model_free, model)
        # the `const llama_vocab *` every llama.h vocab call takes
        self.llama_vocab = llama_cpp.llama_model_get_vocab(model)
        self.n_tokens = int(llama_cpp.llama_vocab_n_tokens(self.llama_vocab))

    def __repr__(self) -> str:
        kv = f", overrides={[o.text for o in self.overrides]}" if self.overrides else ""
        return f"Vocab({self.name!r}, {self.vocab_type}, n_tokens={self.n_tokens}{kv})"

    # -- facts -----------------------------------------------------------------------------
    @cached_property
    def vocab_type(self) -> str:
        return VOCAB_TYPES.get(int(llama_cpp.llama_vocab_type(self.llama_vocab)), "UNKNOWN")

    @property
    def bos(self) -> int:
        return int(llama_cpp.llama_vocab_bos(self.llama_vocab))

    @property
    def eos(self) -> int:
        return int(llama_cpp.llama_vocab_eos(self.llama_vocab))

    @property
    def eot(self) -> int:
        return int(llama_cpp.llama_vocab_eot(self.llama_vocab))

    @cached_property
    def eog_tokens(self) -> tuple[int, ...]:
        """The ids `llama_vocab_is_eog` says end a generation, ascending (a call per token, once)."""
        is_eog, v = llama_cpp.llama_vocab_is_eog, self.llama_vocab
        return tuple(t for t in range(self.n_tokens) if is_eog(v, t))

    @cached_property
    def has_text(self) -> bool:
        """Some token's piece has bytes (`token_to_piece(t, 0, false)` is not empty); False for a
        vocab whose every token is a control or unknown token, which no grammar can be followed on."""
        return any(self.iter_pieces())

    def require_text(self) -> None:
        """InputError, in one line, for a vocab on which no token has text."""
        if not self.has_text:
            raise InputError(
                self.path,
                f"no token has text: all {self.n_tokens} tokens are control or unknown tokens (every piece is empty), "
                f"so no grammar can be followed and no bridge judged",
            )

    # -- conversions -------------------------------------------------------------------------
    # Every call writes into a buffer of its own. The server's load test judges answers from
    # several threads on one Vocab: with one buffer per object, a thread copied the piece out after
    # another thread's call had written its own piece there, and one byte of a judged output came
    # from another answer (tests/test_threads.py). A fresh 1 KiB buffer costs about 0.1 us.
    def token_to_piece(
        self, token: int, lstrip: int = 0, special: bool = False, max_len: int = MAX_PIECE, grow: bool = False
    ) -> bytes:
        """`llama_token_to_piece`; a piece longer than `max_len` raises InputError, or with `grow` is
        asked for again at the size llama.cpp says it needs (as a caller that resizes its buffer does)."""
        buf = bytearray(max_len)
        n = _call.token_to_piece(self.llama_vocab, token, buf, max_len, lstrip, special)
        if n < 0 and grow:
            max_len = -n
            buf = bytearray(max_len)
            n = _call.token_to_piece(self.llama_vocab, token, buf, max_len, lstrip, special)
        if n < 0:
            raise InputError(
                self.path,
                f"token {token} piece is {-n} bytes, longer than the bridge's {max_len}-byte buffer (upstream aborts)",
            )
        return bytes(buf[:n])

    def detokenize(
        self, tokens: list[int], remove_special: bool = False, unparse_special: bool = False, max_len: int = MAX_PIECE
    ) -> bytes:
        """`llama_detokenize` on a token sequence (the bridge calls it on one token)."""
        arr = array("i", tokens)
        buf = bytearray(max_len)
        n = _call.detokenize(self.llama_vocab, arr, len(tokens), buf, max_len, remove_special, unparse_special)
        if n < 0:
            raise InputError(
                self.path,
                f"detokenize needs {-n} bytes, longer than the bridge's {max_len}-byte buffer (upstream aborts)",
            )
        return bytes(buf[:n])

    def iter_pieces(self, lstrip: int = 0, special: bool = False) -> Iterator[bytes]:
        """`token_to_piece(t, lstrip, special)` for t = 0, 1, ... in order, at a fraction of the cost
        of calling it per token; for scans that may stop early."""
        tp, vp = _call.token_to_piece, self.llama_vocab
        buf = bytearray(MAX_PIECE)
        view = memoryview(buf)
        lstrip, special = int(lstrip), bool(special)
        for t in range(self.n_tokens):
            n = tp(vp, t, buf, MAX_PIECE, lstrip, special)
            if n < 0:
                raise InputError(
                    self.path,
                    f"token {t} piece is {-n} bytes, longer than the bridge's {MAX_PIECE}-byte buffer (upstream "
                    f"aborts)",
                )
            yield bytes(view[:n])

    def piece_detok_differences(self) -> list[tuple[int, bytes, bytes, bytes]]:
        """(token, piece, detok, lstripped) for every token whose `token_to_piece(t, 0, False)`
        differs from `detokenize([t], False, False)`, in token order, with its
        `token_to_piece(t, 1, False)`; raises InputError as those calls do.

        One compiled pass (`_llamacall.piece_detok_differences`): the same three calls per token,
        at the C loop's speed; only the differing tokens come back as bytes.
        """
        out, failure = _call.piece_detok_differences(self.llama_vocab, MAX_PIECE)
        if failure is not None:
            t, which, need = failure
            what = f"detokenize needs {need} bytes" if which == 1 else f"token {t} piece is {need} bytes"
            raise InputError(self.path, f"{what}, longer than the bridge's {MAX_PIECE}-byte buffer (upstream aborts)")
        return out

    def meta_str(self, key: str) -> str | None:
        """A scalar GGUF key as llama.cpp keeps it (`llama_model_meta_val_str`), None when absent.

        llama.cpp renders it as text: a string as is, a bool as `true`/`false`, an integer in
        decimal; array keys are not kept.
        """
        size = 256
        while True:
            buf = ctypes.create_string_buffer(size)
            n = llama_cpp.llama_model_meta_val_str(self._model, key.encode(), buf, size)
            if n < 0:
                return None
            if n < size:
                return buf.raw[:n].decode("utf-8", "replace")
            size = n + 1

    def tokenize(self, text: bytes, add_special: bool = False, parse_special: bool = True) -> list[int]:
        """`llama_tokenize`; grows the output buffer when llama.cpp asks for more."""
        cap = max(8, len(text) + 8)
        while True:
            out = (llama_cpp.llama_token * cap)()
            n = llama_cpp.llama_tokenize(self.llama_vocab, text, len(text), out, cap, add_special, parse_special)
            if n >= 0:
                return list(out[:n])
            if -n <= cap:  # pragma: no cover - llama.cpp reports the size it needs
                raise InputError(self.path, f"llama_tokenize failed on {text!r} ({n})")
            cap = -n

    def real_bytes(self, tokens: list[int]) -> bytes:
        """The bytes a token sequence really stands for: its raw pieces
        (`token_to_piece(t, 0, false)`) joined. A control or unknown token adds nothing."""
        return b"".join(self.token_to_piece(t) for t in tokens)
