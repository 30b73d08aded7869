"""A llama.cpp vocab, loaded through llama-cpp-python, with the conversions the bridge uses.

Names follow `include/llama.h` (`token_to_piece`, `detokenize`, `tokenize`, `lstrip`,
`add_special`, `parse_special`) so a reader can grep upstream for each call.

Loading a vocab-only GGUF costs well under a second; every conversion is one C call.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import llama_cpp

from .errors import InputError

VOCAB_TYPES = {0: "NONE", 1: "SPM", 2: "BPE", 3: "WPM", 4: "UGM", 5: "RWKV", 6: "PLAMO2"}

# mirrors the size that common/llguidance.cpp gives one token's piece
MAX_PIECE = 1024


def _silence_llama_log() -> None:
    """llama.cpp logs every load to stderr; keep notebooks readable unless asked otherwise."""
    if os.environ.get("LLGBRIDGE_LLAMA_LOG"):
        return

    @llama_cpp.llama_log_callback
    def _quiet(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:  # pragma: no cover
        return None

    # keep a reference: llama.cpp stores the pointer
    _silence_llama_log.cb = _quiet  # type: ignore[attr-defined]
    llama_cpp.llama_log_set(_quiet, ctypes.c_void_p(0))


_silence_llama_log()
llama_cpp.llama_backend_init()

GGUF_MAGIC = b"GGUF"


def check_gguf_file(path: Path) -> None:
    """Refuse what is plainly not a GGUF file, before llama.cpp sees it."""
    if not path.exists():
        raise InputError(path, "no such file")
    if path.is_dir():
        raise InputError(path, "is a directory, not a GGUF file")
    size = path.stat().st_size
    if size == 0:
        raise InputError(path, "empty file")
    with path.open("rb") as f:
        magic = f.read(4)
    if magic != GGUF_MAGIC:
        raise InputError(path, f"not a GGUF file (starts with {magic!r}, expected b'GGUF')")


@dataclass(frozen=True)
class Piece:
    token: int
    data: bytes


class Vocab:
    """A llama.cpp vocab loaded with `vocab_only`, kept alive as long as this object."""

    def __init__(self, path: str | os.PathLike[str], name: str | None = None) -> None:
        self.path = Path(path)
        self.name = name or vocab_name(self.path)
        check_gguf_file(self.path)
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        model = llama_cpp.llama_model_load_from_file(str(self.path).encode(), params)
        if not model:
            raise InputError(self.path, "llama.cpp could not load it as a model or vocab (see LLGBRIDGE_LLAMA_LOG=1)")
        self._model = model
        self.vocab = llama_cpp.llama_model_get_vocab(model)
        self.n_tokens = int(llama_cpp.llama_vocab_n_tokens(self.vocab))
        self._buf = ctypes.create_string_buffer(MAX_PIECE)
        self._tok_buf = (llama_cpp.llama_token * 1)()

    def __del__(self) -> None:
        model = getattr(self, "_model", None)
        if model:
            llama_cpp.llama_model_free(model)
            self._model = None

    def __repr__(self) -> str:
        return f"Vocab({self.name!r}, {self.vocab_type}, n_tokens={self.n_tokens})"

    # -- facts -----------------------------------------------------------------------------
    @cached_property
    def vocab_type(self) -> str:
        return VOCAB_TYPES.get(int(llama_cpp.llama_vocab_type(self.vocab)), "UNKNOWN")

    @property
    def bos(self) -> int:
        return int(llama_cpp.llama_vocab_bos(self.vocab))

    @property
    def eos(self) -> int:
        return int(llama_cpp.llama_vocab_eos(self.vocab))

    @property
    def eot(self) -> int:
        return int(llama_cpp.llama_vocab_eot(self.vocab))

    def attr(self, token: int) -> int:
        return int(llama_cpp.llama_token_get_attr(self.vocab, token))

    # -- conversions -------------------------------------------------------------------------
    def token_to_piece(self, token: int, lstrip: int = 0, special: bool = False, max_len: int = MAX_PIECE) -> bytes:
        """`llama_token_to_piece`; a piece longer than `max_len` raises ValueError."""
        n = llama_cpp.llama_token_to_piece(self.vocab, token, self._buf, max_len, lstrip, special)
        if n < 0:
            raise ValueError(f"{self.name}: token {token} piece is {-n} bytes, longer than the {max_len}-byte buffer")
        return self._buf.raw[:n]

    def detokenize(
        self, tokens: list[int], remove_special: bool = False, unparse_special: bool = False, max_len: int = MAX_PIECE
    ) -> bytes:
        """`llama_detokenize` on a token sequence (the bridge calls it on one token)."""
        if len(tokens) == 1:
            arr = self._tok_buf
            arr[0] = tokens[0]
        else:
            arr = (llama_cpp.llama_token * len(tokens))(*tokens)
        n = llama_cpp.llama_detokenize(self.vocab, arr, len(tokens), self._buf, max_len, remove_special, unparse_special)
        if n < 0:
            raise ValueError(f"{self.name}: detokenize needs {-n} bytes, more than the {max_len}-byte buffer")
        return self._buf.raw[:n]

    def tokenize(self, text: bytes, add_special: bool = False, parse_special: bool = True) -> list[int]:
        """`llama_tokenize`; grows the output buffer when llama.cpp asks for more."""
        cap = max(8, len(text) + 8)
        while True:
            out = (llama_cpp.llama_token * cap)()
            n = llama_cpp.llama_tokenize(self.vocab, text, len(text), out, cap, add_special, parse_special)
            if n >= 0:
                return list(out[:n])
            if -n <= cap:  # pragma: no cover - llama.cpp reports the size it needs
                raise ValueError(f"{self.name}: llama_tokenize failed on {text!r} ({n})")
            cap = -n

    def pieces(self, tokens: list[int]) -> list[bytes]:
        return [self.token_to_piece(t) for t in tokens]

    def reassemble(self, tokens: list[int]) -> bytes:
        """The bytes a token sequence really stands for: the concatenation of raw pieces."""
        return b"".join(self.token_to_piece(t) for t in tokens)


def vocab_name(path: Path) -> str:
    """`ggml-vocab-llama-spm.gguf` -> `llama-spm`; any other file keeps its stem."""
    stem = path.name
    if stem.endswith(".gguf"):
        stem = stem[: -len(".gguf")]
    return stem[len("ggml-vocab-") :] if stem.startswith("ggml-vocab-") else stem
