"""The byte-diff census (guide 4.2 and 4.3): raw piece vs single-token detokenize, per token.

For every token, `llama_token_to_piece(t, lstrip=0, special=false)` (what the fixed bridge
hands llguidance) is compared with `llama_detokenize(&t, 1, remove_special=false,
unparse_special=false)` (what upstream hands it). Each differing token is attributed to the
mechanism in `llama_vocab::impl::detokenize` (src/llama-vocab.cpp:3789-3899 in the vendored
tree) that explains it:

- `lstrip`: the piece with one leading space stripped (`remove_space = add_space_prefix`,
  :3806, passed to `token_to_piece` as `lstrip`, :3824);
- `clean_spaces`: the three passes over `" ?!.,"`, `" ' "` and `" 's"`-style contractions
  (:3840-3896), ported in `clean_spaces` below;
- `lstrip+clean_spaces`: both; `other`: neither explains it (reported, never hidden).

Costs two C calls per token (a third for each differing one), made through
`Vocab.piece_detok_differences` and the compiled binding, and no walk of the GGUF file beyond
`Vocab`'s check before the load (`python -m llgbridge.measure.bench` measures it against the same loop
in C, in parts).
"""

from __future__ import annotations

import re
import struct
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any, cast

from gguf import Keys

from ...gguf_meta import VocabMeta, read_meta
from ...vocab import Vocab
from . import CensusPayload


def clean_spaces(text: bytes) -> bytes:
    """Port of the `clean_spaces` passes of `llama_vocab::impl::detokenize` (:3840-3896)."""
    t = bytearray(text)
    # first pass: " ?", " !", " .", " ," lose the space
    out = bytearray(t[:1])
    for i in range(1, len(t)):
        x = t[i]
        if t[i - 1] == 0x20 and x in b"?!.,":
            out.pop()
        out.append(x)
    t = out
    # second pass: a single apostrophe between spaces loses both spaces
    out = bytearray(t[:1])
    i = 1
    while i < len(t):
        x = t[i]
        if x == 0x27 and i + 1 < len(t) and t[i - 1] == 0x20 and t[i + 1] == 0x20:
            out.pop()
            out.append(x)
            t[i + 1] = 0  # upstream writes '\0' over the next space and skips it (`text[++i]`)
            i += 2
            continue
        out.append(x)
        i += 1
    t = out
    # third pass: " 's", " 'm", " 're", " 've" lose the space
    out = bytearray(t[:1])
    for i in range(1, len(t)):
        x = t[i]
        if t[i - 1] == 0x20 and x == 0x27 and i + 1 < len(t):
            x1 = t[i + 1]
            if x1 in b"sm":
                out.pop()
            elif x1 not in b"td" and i + 2 < len(t) and bytes(t[i + 1 : i + 3]) in (b"re", b"ve"):
                out.pop()
        out.append(x)
    return bytes(out)


@dataclass(slots=True)  # a census makes up to 155k of them: slots make each cheaper to build
class Diff:
    token: int
    piece: bytes
    detok: bytes
    mechanism: str

    @property
    def lost_leading_space(self) -> bool:
        return self.piece.startswith(b" ") and not self.detok.startswith(b" ")


@dataclass
class Census:
    vocab: str
    meta: VocabMeta
    vocab_type: str
    n_tokens: int
    add_space_prefix_observed: bool
    detok_lstrip: bool
    detok_clean_spaces: bool
    diffs: list[Diff] = field(default_factory=list)

    @property
    def differing(self) -> int:
        return len(self.diffs)

    @cached_property  # the summary and the bench both ask; `run_census` builds a census whole
    def lost_leading_space(self) -> int:
        return sum(d.lost_leading_space for d in self.diffs)

    def by_mechanism(self) -> dict[str, int]:
        out = {"lstrip": 0, "clean_spaces": 0, "lstrip+clean_spaces": 0, "other": 0}
        for d in self.diffs:
            out[d.mechanism] += 1
        return out

    def summary(self) -> dict[str, Any]:
        """One tidy row (the census.csv columns)."""
        return {
            "vocab": self.vocab,
            "vocab_type": self.vocab_type,
            "tokenizer_model": self.meta.model,
            "pre": self.meta.pre,
            "add_space_prefix_kv": self.meta.add_space_prefix,
            "add_space_prefix_observed": self.add_space_prefix_observed,
            "detok_lstrip": self.detok_lstrip,
            "detok_clean_spaces": self.detok_clean_spaces,
            "bos": self.meta.bos,
            "eos": self.meta.eos,
            "n_tokens": self.n_tokens,
            "differing": self.differing,
            "lost_leading_space": self.lost_leading_space,
            **{f"by_{k.replace('+', '_and_')}": v for k, v in self.by_mechanism().items()},
        }

    def to_json(self) -> CensusPayload:
        out = {
            "summary": self.summary(),
            "meta": asdict(self.meta),
            "diffs": [
                {
                    "token": d.token,
                    "piece": d.piece.decode("utf-8", "backslashreplace"),
                    "detok": d.detok.decode("utf-8", "backslashreplace"),
                    "piece_hex": d.piece.hex(),
                    "detok_hex": d.detok.hex(),
                    "mechanism": d.mechanism,
                    "lost_leading_space": d.lost_leading_space,
                }
                for d in self.diffs
            ],
        }
        return cast(CensusPayload, out)


def classify(piece: bytes, lstripped: bytes, detok: bytes, lstrip: bool, clean: bool) -> str:
    """Which mechanism turns `piece` into `detok`, given which ones this vocab's detokenize runs.

    subtle: a BPE piece `' ..'` lstripped is also `'..'`, but BPE never lstrips
    (`remove_space = add_space_prefix` is false), so there the cause is `clean_spaces`.
    """
    if lstrip and lstripped != piece and detok == lstripped:
        return "lstrip"
    if clean and detok == clean_spaces(piece):
        return "clean_spaces"
    if lstrip and clean and lstripped != piece and detok == clean_spaces(lstripped):
        return "lstrip+clean_spaces"
    return "other"


_WORD = re.compile(rb"^ [A-Za-z0-9]+$")
_ALNUM = re.compile(rb"^[A-Za-z]{2,}$")


def detokenize_mechanisms(vocab: Vocab) -> tuple[bool, bool]:
    """(lstrip, clean_spaces): which passes this vocab's `llama_detokenize` runs, measured.

    Neither flag is exposed by llama.h. `lstrip`: a piece `' word'` detokenized alone loses its
    space (clean_spaces never touches a space before a letter). `clean_spaces`: a piece `' .'`
    detokenized *after* a word token loses its space (lstrip only ever touches the first token).
    """
    lstrip = clean = None
    word: int | None = None
    punct: int | None = None
    for t, p in enumerate(vocab.iter_pieces()):
        if lstrip is None and _WORD.match(p):
            lstrip = vocab.detokenize([t]) == p[1:]
        if word is None and _ALNUM.match(p):
            word = t
        if punct is None and p in (b" .", b" ,", b" ?", b" !"):
            punct = t
        if lstrip is not None and word is not None and punct is not None:
            break
    if word is not None and punct is not None:
        clean = vocab.detokenize([word, punct]) == vocab.token_to_piece(word) + vocab.token_to_piece(punct)[1:]
    return bool(lstrip), bool(clean)


def observed_add_space_prefix(vocab: Vocab) -> bool:
    """Whether `llama_tokenize(add_special=false)` prepends a space (guide 5.1), measured."""
    toks = vocab.tokenize(b"a", add_special=False, parse_special=True)
    return vocab.real_bytes(toks).startswith(b" ")


def loaded_meta(vocab: Vocab) -> VocabMeta:
    """`read_meta(vocab.path)`, from what llama.cpp parsed when it loaded the vocab.

    Why: `read_meta` walks every token and merge string in Python, a second time after `Vocab`'s
    check before the load. Loading succeeded, so llama.cpp has already checked the types this
    reads (`general.architecture`, `tokenizer.ggml.model`/`pre` strings, `bos`/`eos` uint32,
    `add_space_prefix` bool) and that the token list is an array of `n_tokens` strings;
    version and tensor count sit in the fixed 24-byte header. A `no_vocab` model skips those
    checks (and may have no token list), so it gets the full walk.
    """
    if vocab.vocab_type == "NONE":
        return read_meta(vocab.path)
    with vocab.path.open("rb") as f:
        _magic, version, n_tensors = struct.unpack("<4sIQ", f.read(16))

    def num(key: str) -> int | None:
        v = vocab.meta_str(key)
        return None if v is None else int(v)

    asp = vocab.meta_str(Keys.Tokenizer.ADD_PREFIX)
    return VocabMeta(
        architecture=vocab.meta_str(Keys.General.ARCHITECTURE),
        model=vocab.meta_str(Keys.Tokenizer.MODEL),
        pre=vocab.meta_str(Keys.Tokenizer.PRE),
        add_space_prefix=None if asp is None else asp == "true",
        bos=num(Keys.Tokenizer.BOS_ID),
        eos=num(Keys.Tokenizer.EOS_ID),
        n_tokens=vocab.n_tokens,
        n_tensors=n_tensors,
        version=version,
    )


def run_census(vocab: Vocab) -> Census:
    """Compare every token's raw piece with its single-token detokenize."""
    lstrip, clean = detokenize_mechanisms(vocab)
    return Census(
        vocab=vocab.name,
        meta=loaded_meta(vocab),
        vocab_type=vocab.vocab_type,
        n_tokens=vocab.n_tokens,
        add_space_prefix_observed=observed_add_space_prefix(vocab),
        detok_lstrip=lstrip,
        detok_clean_spaces=clean,
        diffs=[
            Diff(t, piece, detok, classify(piece, lstripped, detok, lstrip, clean))
            for t, piece, detok, lstripped in vocab.piece_detok_differences()
        ],
    )
