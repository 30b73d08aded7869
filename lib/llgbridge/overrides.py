"""llama.cpp's metadata key overrides (`--override-kv KEY=TYPE:VALUE`), as part of an input.

An override changes what llama.cpp reads from a GGUF file without changing the file: the loader
(`llama_model_loader::get_key`) takes the override's value wherever it would read that key. So
`tokenizer.ggml.add_space_prefix=bool:true` on Gemma 3 270M, whose file says `false`, gives a
real trained model the SentencePiece space prefix of TinyLlama and Mistral (the guide's models).

The syntax is the one `common/common.cpp`'s `string_parse_kv_override` reads: KEY (under 128
bytes), `=`, then `int:`, `float:`, `bool:` (`true` or `false`) or `str:` (at most 127 bytes)
and the value. It reaches every layer that loads a file, each the way llama.cpp takes it:

- `llama_model_params.kv_overrides`, a NULL-key-terminated array (`Vocab`, and the compiled
  harness and llama.cpp's own test through `native/kv_override.cpp`, which reads `ENV`);
- llama-cpp-python's `Llama(kv_overrides={KEY: value})` (`generation.load_model`);
- `llama-server --override-kv KEY=TYPE:VALUE` (`analyses.server.llama_server.override_args`).

But:
- stricter than llama.cpp where it guesses: `int:abc` is 0 to `std::atol` and `float:1x` is 1.0
  to `std::atof`; here each is refused, in one line naming the override;
- a `str:` value with a comma or a double quote is refused: `--override-kv` splits its argument
  as a CSV row, so the server would read another value than the library;
- llama.cpp keeps an override of a key it never reads, or of the wrong type (it warns and keeps
  the file's value), without failing; `check_log` reads its log after a load and refuses both, so
  an override that changes nothing never names an input.

Standard library only (`check_file` imports gguf when called): `models` and `params` use it before the
virtual environment exists.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .errors import InputError

TYPES = ("int", "float", "bool", "str")
KEY_MAX = 127  # llama_model_kv_override.key is char[128]
STR_MAX = 127  # and val_str too
# how the compiled programs get them (native/kv_override.cpp): one override a line
ENV = "LLGBRIDGE_KV_OVERRIDES"
_INT64 = (-(2**63), 2**63 - 1)


@dataclass(frozen=True)
class Override:
    key: str
    type: str  # one of TYPES
    value: int | float | bool | str

    @property
    def text(self) -> str:
        """The override as `--override-kv` takes it, spelled one way (`int:007` is `int:7`)."""
        if self.type == "bool":
            v = "true" if self.value else "false"
        elif self.type == "float":
            v = repr(float(self.value))
        else:
            v = str(self.value)
        return f"{self.key}={self.type}:{v}"

    def __str__(self) -> str:
        return self.text


def _refuse(text: str, cause: str) -> InputError:
    return InputError(f"override {text!r}", cause)


def parse(text: str | Override) -> Override:
    """One override, `KEY=TYPE:VALUE` (or one already parsed); InputError naming it when llama.cpp
    would refuse it or read another value than the one written."""
    if isinstance(text, Override):
        return text
    if not isinstance(text, str):
        raise InputError("override", f"expected KEY=TYPE:VALUE text, got {type(text).__name__} {text!r:.60}")
    key, eq, rest = text.partition("=")
    if not eq:
        raise _refuse(text, "no '=': llama.cpp takes KEY=TYPE:VALUE (e.g. tokenizer.ggml.add_space_prefix=bool:true)")
    _check_key(text, key)
    kind, colon, value = rest.partition(":")
    if not colon or kind not in TYPES:
        raise _refuse(text, f"unknown type {kind!r}: llama.cpp takes {', '.join(t + ':' for t in TYPES)}")
    return Override(key, kind, _VALUES[kind](text, value))


def _check_key(text: str, key: str) -> None:
    """InputError naming override `text` when llama.cpp would refuse its `key` or cut it."""
    if not key:
        raise _refuse(text, "an empty key")
    if len(key.encode()) > KEY_MAX:
        raise _refuse(text, f"the key is {len(key.encode())} bytes; llama.cpp keeps at most {KEY_MAX}")
    if any(c in key for c in '\0\n\r,"') or key != key.strip():
        raise _refuse(text, "the key holds a space at an end, a comma, a quote, a newline or a NUL byte")


def _int(text: str, value: str) -> int:
    if not re.fullmatch(r"[+-]?[0-9]+", value):
        raise _refuse(text, f"{value!r} is not a whole number (llama.cpp's std::atol would read it as another)")
    n = int(value)
    if not _INT64[0] <= n <= _INT64[1]:
        raise _refuse(text, f"{value} does not fit llama.cpp's 64-bit integer")
    return n


def _float(text: str, value: str) -> float:
    try:
        x = float(value)
    except ValueError:
        raise _refuse(text, f"{value!r} is not a number (llama.cpp's std::atof would read it as another)") from None
    if not math.isfinite(x) or value.strip() != value:
        raise _refuse(text, f"{value!r} is not a finite number written plainly")
    return x


def _bool(text: str, value: str) -> bool:
    if value not in ("true", "false"):
        raise _refuse(text, f"{value!r} is not a boolean: llama.cpp takes exactly true or false")
    return value == "true"


def _str(text: str, value: str) -> str:
    if len(value.encode()) > STR_MAX:
        raise _refuse(text, f"the value is {len(value.encode())} bytes; llama.cpp keeps at most {STR_MAX}")
    if any(c in value for c in '\0\n\r,"'):
        raise _refuse(
            text,
            "the value holds a comma, a quote, a newline or a NUL byte, which llama-server's --override-kv would split "
            "or cut",
        )
    return value


# each type's value, read as llama.cpp would read it, from override `text` (named when it is refused)
_VALUES: dict[str, Callable[[str, str], int | float | bool | str]] = {
    "int": _int,
    "float": _float,
    "bool": _bool,
    "str": _str,
}


def parse_all(texts: Iterable[str | Override]) -> tuple[Override, ...]:
    """Several overrides, ordered by key (llama.cpp keeps them in a map: their order means
    nothing); the same key twice is refused, since llama.cpp would keep one silently."""
    got: dict[str, Override] = {}
    for t in texts:
        o = parse(t)
        if o.key in got:
            raise _refuse(
                str(t), f"{o.key} is overridden twice ({got[o.key].text} and {o.text}); llama.cpp would keep one"
            )
        got[o.key] = o
    return tuple(got[k] for k in sorted(got))


def canonical(texts: Iterable[str | Override]) -> list[str]:
    """The overrides as a result records them: each spelled one way, ordered by key."""
    return [o.text for o in parse_all(texts)]


def llama_cpp_python(ovs: Iterable[Override]) -> dict[str, bool | int | float | str] | None:
    """llama-cpp-python's `Llama(kv_overrides=...)`: it picks the type from the Python value
    (a bool before an int, as its own loop does), so each value keeps its Python type."""
    d = {o.key: o.value for o in ovs}
    return d or None


def env(ovs: Iterable[Override]) -> dict[str, str]:
    """The environment native/kv_override.cpp reads; empty (so unset) without overrides."""
    lines = [o.text for o in ovs]
    return {ENV: "\n".join(lines)} if lines else {}


def suffix(ovs: Iterable[Override]) -> str:
    """A part of an input name saying what was overridden: `+add_space_prefix-true` (the key's last
    part and the value, each a name's characters); several are joined."""
    parts = []
    for o in ovs:
        v = o.text.split(":", 1)[1]
        parts.append("+" + re.sub(r"[^A-Za-z0-9._-]", "_", f"{o.key.rsplit('.', 1)[-1]}-{v}"))
    return "".join(parts)


def model_label(file_name: str, ovs: Iterable[str | Override]) -> str:
    """A model as a table's `model` column names it: its file, and the overrides it is loaded
    with, so the same file loaded two ways is two models wherever rows are grouped by model."""
    texts = [parse(o).text for o in ovs]
    return file_name + (f" --override-kv {','.join(texts)}" if texts else "")


def tag(ovs: Iterable[Override]) -> str:
    """A short, stable tag of a set of overrides, for a cached file that must not be shared."""
    text = "\n".join(o.text for o in ovs)
    return hashlib.sha256(text.encode()).hexdigest()[:8] if text else ""


def _known_keys(arch: str) -> set[str]:
    """Every key gguf names (llama.cpp's own list, mirrored), `{arch}` filled in with `arch`."""
    import gguf

    out: set[str] = set()
    todo: list[type] = [gguf.Keys]
    while todo:
        for v in vars(todo.pop()).values():
            if isinstance(v, type):
                todo.append(v)
            elif isinstance(v, str) and "." in v:
                out.add(v.replace("{arch}", arch))
    return out


_WRITER_KIND = {"bool": "bool", "string": "str", "float32": "float", "float64": "float", "array": "array"}


@cache
def _key_kinds(arch: str) -> dict[str, str]:
    """Key -> the type gguf's writer gives it (`add_bool(Keys.Tokenizer.ADD_PREFIX, ...)`: bool), read
    from gguf's GGUFWriter source, so a key the file does not hold is still typed as llama.cpp reads it."""
    import ast
    import inspect

    import gguf

    def key_of(node: ast.expr) -> str | None:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
            node = node.func.value
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.insert(0, node.attr)
            node = node.value
        if not (isinstance(node, ast.Name) and node.id == "Keys" and parts):
            return None
        obj: object = gguf.Keys
        for part in parts:
            obj = getattr(obj, part, None)
        return obj.replace("{arch}", arch) if isinstance(obj, str) else None

    out: dict[str, str] = {}
    for node in ast.walk(ast.parse(inspect.getsource(gguf.GGUFWriter))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            what = node.func.attr.removeprefix("add_")
            kind = _WRITER_KIND.get(what) or ("int" if what.startswith(("uint", "int")) else None)
            key = key_of(node.args[0])
            if kind and key:
                out[key] = kind
    return out


def kind_name(value: object) -> str:
    """A value's JSON-ish kind for a message: bool apart from int."""
    return "bool" if isinstance(value, bool) else type(value).__name__


def check_file(ovs: Iterable[Override], path: Path) -> None:
    """Refuse, in one line and before any run, an override that `path`'s own key-values show
    llama.cpp would not take: a key the file holds as another type (llama.cpp warns and keeps the
    file's value: `add_space_prefix=int:1` on a bool), an array key, a key neither in the file nor
    one llama.cpp reads for its architecture (an unknown key, or another architecture's), or a
    token id outside the file's tokens (llama.cpp drops it, and the page said the override "changes
    nothing"). A truncated file is refused here too (`gguf_meta.read_kv`)."""
    ovs = tuple(ovs)
    if not ovs:
        return
    # gguf's writer and the reader only where there are overrides to check: most runs have none
    import gguf

    from .gguf_meta import ArrayInfo, read_kv  # with gguf, for the same reason

    kv, _, _ = read_kv(path)
    arch = str(kv.get("general.architecture", ""))
    known = _known_keys(arch)
    toks = kv.get("tokenizer.ggml.tokens")
    n_tokens = toks.count if isinstance(toks, ArrayInfo) else None
    where = f"{path.name} ({arch or 'no architecture'})"
    for o in ovs:
        have = kv.get(o.key)
        if isinstance(have, ArrayInfo):
            raise _refuse(o.text, f"{o.key} is an array in {where}; --override-kv sets only a single value")
        if have is not None and kind_name(have) != o.type:
            raise _refuse(
                o.text,
                f"{where} holds {o.key} as {kind_name(have)} ({have!r:.40}), not {o.type}: "
                "llama.cpp would warn and keep the file's value",
            )
        kind = _key_kinds(arch).get(o.key)
        if have is None and kind not in (None, o.type):
            raise _refuse(
                o.text, f"llama.cpp reads {o.key} as {kind}, not {o.type}: it would warn and keep the file's value"
            )
        if have is None and o.key not in known:
            other = o.key.split(".", 1)[0]
            if other in gguf.MODEL_ARCH_NAMES.values() and other != arch:
                raise _refuse(
                    o.text, f"{o.key} is a key of the {other} architecture; llama.cpp never reads it on {where}"
                )
            raise _refuse(o.text, f"no such key: not in {where}, nor one llama.cpp reads for its architecture")
        if o.key.endswith("_token_id") and o.type == "int" and n_tokens and not 0 <= int(o.value) < n_tokens:
            raise _refuse(o.text, f"token {o.value} is outside the {n_tokens} tokens of {where}: llama.cpp drops it")


# what llama.cpp's loader logs (llama-model-loader.cpp, validate_override): the first when it takes
# an override, the second when the key is read as another type (it then keeps the file's value)
APPLIED = re.compile(r"Using metadata override \(\s*(\w+)\) '([^']*)'")
BAD_TYPE = re.compile(r"Bad metadata override type for key '([^']*)', expected (\w+) but got (\w+)")


# what a vocab-only load reads (llama_model_base::load_hparams stops before the hyper-parameters
# there): the tokenizer's keys, and the architecture and name
VOCAB_ONLY_KEYS = ("tokenizer.", "general.")


def check_log(ovs: Iterable[Override], log: str, loaded: str, vocab_only: bool = False) -> None:
    """Refuse, in one line, an override that llama.cpp's log for the load of `loaded` shows it
    did not take: read as another type (llama.cpp warned and kept the file's value), or never
    read at all (the file's architecture or tokenizer has no use for that key). A `vocab_only`
    load reads no hyper-parameter, so there only a tokenizer or general key must have been read:
    another is judged by the loads that read the weights (the matrix, the server)."""
    applied = {m[2] for m in APPLIED.finditer(log)}
    bad = {m[1]: (m[2], m[3]) for m in BAD_TYPE.finditer(log)}
    for o in ovs:
        if o.key in bad:
            want, got = bad[o.key]
            raise _refuse(o.text, f"llama.cpp reads {o.key} as {want}, not {got}, and kept the file's value ({loaded})")
        if o.key not in applied and (not vocab_only or o.key.startswith(VOCAB_ONLY_KEYS)):
            raise _refuse(
                o.text, f"llama.cpp never read {o.key} while loading {loaded}: the override changes nothing there"
            )


__all__ = [
    "APPLIED",
    "BAD_TYPE",
    "ENV",
    "Override",
    "TYPES",
    "canonical",
    "check_file",
    "check_log",
    "env",
    "llama_cpp_python",
    "model_label",
    "parse",
    "parse_all",
    "suffix",
    "tag",
]
