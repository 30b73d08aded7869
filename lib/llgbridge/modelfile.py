"""A model file, its header read once where it enters, then passed as one value.

An analysis that generates (the matrix, the server) is given its model as a `ModelFile`: the
header's facts it asks (generative or not, and why; the architecture; the size; the chat template's
presence and size; what this suite wrote into a synthetic model) and the tokenizer's check, made
from one walk of the key-value section. The vocab (`vocab.Vocab`), the load (`generation.load_model`)
and the server are handed the value and read no header again. Before, the server's entry read a
model's header three times (its own generative check, the vocab's tokenizer check, the load's
generative check) and the notebook a fourth (`synth.is_synthetic`).

Read once per process: a file read before and unchanged since (same inode, size and date) is the
value already made, so the matrix and the server in one kernel share it; a changed file is read
again. Loading the weights stays with whoever generates.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gguf import Keys

from .errors import InputError
from .gguf_meta import check_tokenizer, read_kv

ENCODER_ONLY = {"bert", "nomic-bert", "nomic-bert-moe", "jina-bert-v2", "t5encoder", "neo-bert", "modern-bert"}
SUITE_PREFIX = "llgbridge."  # the keys this suite writes into a synthetic model (`synth`)
SYNTHETIC_KEY = "llgbridge.synthetic"


@dataclass(frozen=True)
class ModelFile:
    path: Path
    architecture: str | None
    n_tensors: int
    size: int  # bytes, as read
    chat_template: int  # bytes of tokenizer.chat_template; 0: the file has none
    tokenizer_problem: str  # `gguf_meta.check_tokenizer`'s refusal, "" when the tokenizer is consistent
    marks: tuple[tuple[str, Any], ...] = ()  # the suite's own keys (`SUITE_PREFIX`), as written
    template: str = ""  # tokenizer.chat_template, which a real model's prompts are rendered with

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> ModelFile:
        """The file's value, its header walked once (`gguf_meta.read_kv`), or the one made before
        while the file is unchanged. InputError, in one line, for what is not a readable GGUF."""
        p = Path(path)
        try:
            key = _stat(p)
        except OSError:
            key = None
        seen = _READ.get(str(p.resolve())) if key else None
        if seen is not None and seen[0] == key and seen[1].path == p:
            return seen[1]
        kv, n_tensors, _ = read_kv(p)
        try:
            check_tokenizer(p, kv)
            problem = ""
        except InputError as e:
            problem = e.cause
        template = kv.get(Keys.Tokenizer.CHAT_TEMPLATE)
        arch = kv.get(Keys.General.ARCHITECTURE)
        out = cls(
            p,
            arch if isinstance(arch, str) else None,
            n_tensors,
            p.stat().st_size,
            len(template.encode()) if isinstance(template, str) else 0,
            problem,
            tuple(sorted((k, v) for k, v in kv.items() if k.startswith(SUITE_PREFIX))),
            template if isinstance(template, str) else "",
        )
        if key:
            _READ[str(p.resolve())] = (key, out)
        return out

    def mark(self, key: str) -> Any:
        """The value of one of the suite's own keys, None when the file lacks it."""
        return dict(self.marks).get(key)

    @property
    def synthetic(self) -> bool:
        """A model `synth` wrote (random weights around a fixture's tokenizer)."""
        return self.mark(SYNTHETIC_KEY) is True

    @property
    def generative(self) -> bool:
        return not self.not_generative

    @property
    def not_generative(self) -> str:
        """Why this file cannot generate, "" when it can."""
        if self.n_tensors == 0:
            return "vocab-only file: it has no weights to generate with (use its synthetic model instead)"
        if self.architecture in ENCODER_ONLY:
            return f"encoder-only architecture {self.architecture!r}: it cannot generate text"
        return ""

    def require_generative(self) -> None:
        """Refuse, in one line, a file that cannot generate."""
        if self.not_generative:
            raise InputError(self.path, self.not_generative)

    def require_tokenizer(self) -> None:
        """Refuse, in one line, a tokenizer whose key-values are inconsistent."""
        if self.tokenizer_problem:
            raise InputError(self.path, self.tokenizer_problem)


def _stat(p: Path) -> tuple[int, int, int, int]:
    st = p.stat()
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


# resolved path -> (its stat when read, the value made)
_READ: dict[str, tuple[tuple[int, int, int, int], ModelFile]] = {}
