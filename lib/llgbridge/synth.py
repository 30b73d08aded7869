"""A tiny random-weight llama-architecture GGUF around a vocab fixture's real tokenizer.

The vocab fixtures hold a tokenizer and no tensors, so llama.cpp cannot generate from them. This
module writes a model that it can: every `tokenizer.*` key of the fixture copied with its
original value type (strings byte for byte), llama hyper-parameters small enough for a CPU
(embedding 64, 2 blocks, 4 heads, FFN 128, context 512 by default) and weights drawn from
`numpy.random.default_rng(seed)`. Its text is noise; its tokenization is the fixture's.

It follows the tensor names and shapes llama.cpp's `llama` architecture loads (gguf stores a
numpy array's shape reversed: `token_embd` is numpy (n_vocab, n_embd), ggml {n_embd, n_vocab}).
The same inputs and seed give a byte-identical file under the pinned gguf and numpy, and the
file appears only once complete (written under a temporary name in its folder, then renamed).

But:
- it does not make a model that *means* anything: logits are random, so only tokenization,
  sampling plumbing and grammar masks can be audited with it, never output quality;
- it does not keep the fixture's own architecture or hyper-parameters (only `tokenizer.*` keys
  are copied). The vendored llama-vocab.cpp reads no architecture key, and the 19 models
  tokenize sample texts exactly as their fixtures do, but anything else llama.cpp ties to an
  architecture (attention layout, logit soft-capping, ...) is llama's here;
- it does not refuse encoder-only tokenizers: a llama model on bert-bge's WPM or
  nomic-bert-moe's UGM (`t5`) tokenizer loads and generates in llama.cpp (checked on all 19
  fixtures), so only a file with no tokenizer is refused;
- writing the file is `gguf.GGUFWriter`'s, one Python call per array element: about a second on
  llama-bpe's 128k tokens and 280k merges. `ensure_model` builds once and caches.
"""

from __future__ import annotations

import mmap
import os
import secrets
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGUFValueType, GGUFWriter, Keys, LlamaFileType

from . import gguf_meta, loaded, paths
from .errors import InputError
from .gguf_meta import ArrayInfo, read_kv
from .modelfile import SYNTHETIC_KEY, ModelFile
from .overrides import Override, tag
from .results import file_sha256

SOURCE_KEY = "llgbridge.source_vocab"
SEED_KEY = "llgbridge.seed"
# the sha256 of the file the tokenizer came from: the cache is keyed by content, not by name, so
# two different files given the same name never share a model
SOURCE_SHA_KEY = "llgbridge.source_sha256"
# the key overrides the model is made to be loaded with (one KEY=TYPE:VALUE a line; none: absent):
# they are applied at every load, as llama.cpp applies --override-kv, never written into its keys,
# and a model made for an overridden input is a file of its own, never the plain input's
OVERRIDES_KEY = "llgbridge.kv_overrides"
# every Keys.Tokenizer name (tokenizer.ggml.*, tokenizer.chat_template, ...) starts with this
TOKENIZER_PREFIX = Keys.Tokenizer.MODEL.split(".", 1)[0] + "."


@dataclass(frozen=True)
class Shape:
    """A synthetic model's size: embedding width, layers, attention heads, feed-forward width,
    context length."""

    n_embd: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_ff: int = 128
    n_ctx: int = 512


SMALL = Shape()  # the default: small enough for a CPU (the module's docstring)


def make_model(
    vocab_path: Path,
    out_path: Path,
    seed: int = 0,
    shape: Shape = SMALL,
    overrides: list[str] | None = None,
) -> Path:
    """Write a synthetic llama model of `shape` with `vocab_path`'s tokenizer to `out_path`; return
    it. `overrides` (canonical KEY=TYPE:VALUE) are recorded, not applied: its loads apply them."""
    vocab_path, out_path = Path(vocab_path), Path(out_path)
    if shape.n_embd % shape.n_head:
        raise InputError(f"n_embd={shape.n_embd}", f"must be a multiple of n_head={shape.n_head}")
    if seed < 0:
        raise InputError(f"seed={seed}", "must be >= 0 (numpy's default_rng refuses negative seeds)")
    n_vocab = _check_vocab(vocab_path)
    tokenizer = _tokenizer_kv(vocab_path)
    name = paths.vocab_name(vocab_path)

    out_path.parent.mkdir(parents=True, exist_ok=True)
    # Not mkstemp: its 0600 mode would survive the rename; GGUFWriter's open() honours the umask.
    tmp = out_path.parent / f".{out_path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    w = GGUFWriter(tmp, "llama")  # opens the file only at write_header_to_file
    try:
        w.add_name(f"synthetic-{name}")
        w.add_file_type(LlamaFileType.MOSTLY_F16)
        w.add_bool(SYNTHETIC_KEY, True)
        w.add_string(SOURCE_KEY, name)
        w.add_uint64(SEED_KEY, seed)
        w.add_string(SOURCE_SHA_KEY, file_sha256(vocab_path))
        if overrides:
            w.add_string(OVERRIDES_KEY, "\n".join(overrides))
        _add_shape(w, n_vocab, shape)
        for key, (value, vtype, sub_type) in tokenizer.items():
            w.add_key_value(key, value, vtype, sub_type)
        for tname, array in _weights(seed, n_vocab, shape.n_embd, shape.n_layer, shape.n_ff):
            w.add_tensor(tname, array)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        os.replace(tmp, out_path)
    except BaseException:
        w.close()
        tmp.unlink(missing_ok=True)
        raise
    return out_path


def _add_shape(w: GGUFWriter, n_vocab: int, shape: Shape) -> None:
    """The llama architecture's keys of a model of `shape` over `n_vocab` tokens."""
    w.add_vocab_size(n_vocab)
    w.add_context_length(shape.n_ctx)
    w.add_embedding_length(shape.n_embd)
    w.add_block_count(shape.n_layer)
    w.add_feed_forward_length(shape.n_ff)
    w.add_head_count(shape.n_head)
    w.add_head_count_kv(shape.n_head)
    w.add_rope_dimension_count(shape.n_embd // shape.n_head)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)


def ensure_model(
    vocab_name: str,
    models_dir: Path = paths.DATA / "models",
    seed: int = 0,
    vocab_file: Path | None = None,
    overrides: Iterable[Override] = (),
) -> Path:
    """`models_dir/synthetic-<vocab_name>.gguf`, built only when missing, made with another seed, or
    made from another file than the tokenizer's source now (its sha256 differs).

    The tokenizer comes from the fixture named `vocab_name`, or from `vocab_file` when given. A
    model for an input loaded with key `overrides` (`Input.load_overrides`) is its own file
    (`synthetic-<vocab_name>+kv-<tag>.gguf`), which records them; its loads apply them.
    """
    return model_file(vocab_name, models_dir, seed, vocab_file, overrides).path


def model_file(
    vocab_name: str,
    models_dir: Path = paths.DATA / "models",
    seed: int = 0,
    vocab_file: Path | None = None,
    overrides: Iterable[Override] = (),
) -> ModelFile:
    """`ensure_model`'s file as its value (`modelfile.ModelFile`): the header that says whether
    the file is current is the one read, so a model made before is read once."""
    ovs = tuple(overrides)
    kv_list = [o.text for o in ovs]
    stem = f"synthetic-{vocab_name}" + (f"+kv-{tag(ovs)}" if ovs else "")
    out = Path(models_dir) / f"{stem}.gguf"
    vocab = Path(vocab_file) if vocab_file else paths.vocab_path(vocab_name)
    if not vocab.exists():
        raise InputError(vocab, f"no vocab fixture named {vocab_name!r} (run `make data` first)")
    # the synthetic model stands for the tokenizer's bytes as they are now, so they are what the
    # run that asked for it loaded (`loaded`): its result records them, or refuses when they change
    source = loaded.note(vocab)
    if out.exists():
        made = ModelFile.read(out)
        if (
            made.mark(SEED_KEY) == seed
            and made.mark(SOURCE_SHA_KEY) == source
            and (made.mark(OVERRIDES_KEY) or "") == "\n".join(kv_list)
        ):
            return made
    return ModelFile.read(make_model(vocab, out, seed=seed, overrides=kv_list))


def is_synthetic(path: Path) -> bool:
    """True for a file this module wrote. Its header's value (`modelfile.ModelFile.read`, once per
    process while the file is unchanged); InputError if not GGUF."""
    return ModelFile.read(path).synthetic


def _check_vocab(path: Path) -> int:
    """Number of tokens; InputError for what cannot become a runnable llama model.

    Uses the key walk alone, so a bad input fails before any value is read.
    """
    kv, _, _ = read_kv(path)
    if not any(k.startswith(TOKENIZER_PREFIX) for k in kv):
        raise InputError(path, f"no {TOKENIZER_PREFIX}* keys: not a vocab or model file")
    tokens = kv.get(Keys.Tokenizer.LIST)
    if not isinstance(tokens, ArrayInfo) or tokens.type != GGUFValueType.STRING.name or tokens.count == 0:
        raise InputError(path, f"no {Keys.Tokenizer.LIST} string array")
    return tokens.count


def _tokenizer_kv(path: Path) -> dict[str, tuple[Any, GGUFValueType, GGUFValueType | None]]:
    """Every tokenizer key (`tokenizer.*`) as (value, type, array element type), in file order:
    strings as their raw bytes (a token need not be valid UTF-8), numbers as Python numbers, the
    values `gguf.GGUFReader` gives, so `GGUFWriter` writes the same bytes.

    Why not GGUFReader: it builds a numpy array per element, 12 s on llama-bpe's 128k tokens and
    280k merges, against a fraction of a second for this walk (`gguf_meta`'s cursor and string
    walk; `_check_vocab` has already refused what that walk refuses)."""
    try:
        with path.open("rb") as f:
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (ValueError, OSError) as e:
        raise InputError(path, f"cannot read it: {e}") from None
    out: dict[str, tuple[Any, GGUFValueType, GGUFValueType | None]] = {}
    with buf:
        c = gguf_meta._Cursor(buf, path)
        c.take(4, "magic")
        c.unpack("<I", "version")
        c.unpack("<Q", "tensor count")
        for i in range(c.unpack("<Q", "key-value count")):
            key = c.string(f"key #{i}").decode("utf-8", "replace")
            vtype = GGUFValueType(c.unpack("<I", f"type of {key}"))
            sub = None
            if vtype == GGUFValueType.ARRAY:
                sub = GGUFValueType(c.unpack("<I", f"element type of {key}"))
                n = c.unpack("<Q", f"length of {key}")
                if sub == GGUFValueType.STRING:
                    value: Any = gguf_meta._strings(c, key, n, keep=True)
                else:  # arrays of arrays were refused by read_kv in _check_vocab
                    fmt = gguf_meta._SCALAR[sub]
                    raw = c.take(n * struct.calcsize(fmt), f"array {key}")
                    value = np.frombuffer(raw, dtype=np.dtype(fmt)).tolist()
            elif vtype == GGUFValueType.STRING:
                value = c.string(key)  # bytes: an mmap slice
            else:
                value = c.unpack(gguf_meta._SCALAR[vtype], key)
            if key.startswith(TOKENIZER_PREFIX):
                out[key] = (value, vtype, sub)
    return out


def _weights(seed: int, n_vocab: int, n_embd: int, n_layer: int, n_ff: int) -> list[tuple[str, np.ndarray]]:
    """(name, numpy array) in a fixed draw order, so a seed names one file."""
    rng = np.random.default_rng(seed)

    def normal(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    # The two vocab-sized matrices are f16: half of a 262k-token file, and llama.cpp's CPU
    # get_rows and matmul take f16 here. Norms and blocks stay f32.
    tensors = [("token_embd.weight", normal(n_vocab, n_embd).astype(np.float16))]
    for i in range(n_layer):
        b = f"blk.{i}."
        tensors += [
            (b + "attn_norm.weight", ones(n_embd)),
            (b + "attn_q.weight", normal(n_embd, n_embd)),
            (b + "attn_k.weight", normal(n_embd, n_embd)),
            (b + "attn_v.weight", normal(n_embd, n_embd)),
            (b + "attn_output.weight", normal(n_embd, n_embd)),
            (b + "ffn_norm.weight", ones(n_embd)),
            (b + "ffn_gate.weight", normal(n_ff, n_embd)),
            (b + "ffn_up.weight", normal(n_ff, n_embd)),
            (b + "ffn_down.weight", normal(n_embd, n_ff)),
        ]
    tensors += [("output_norm.weight", ones(n_embd)), ("output.weight", normal(n_vocab, n_embd).astype(np.float16))]
    return tensors
