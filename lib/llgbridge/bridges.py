"""The bridges: how a llama.cpp vocab is handed to llguidance, each ported to Python.

A bridge is a port of `llama_sampler_llg_new_tokenizer` in `common/llguidance.cpp` (vendored by
llama-cpp-python 0.3.36; line numbers below are of that file); the bridges differ only in the two
conversion points the PR review guide is about:

- the token table (`token_bytes`/`token_lens`, lines 155-186), and
- the `tokenize_fn` callback (lines 123-137) with its `use_approximate_greedy_tokenize_fn` flag.

The bridges: `upstream` (as shipped), `fixed` (the PR), `sentinel` (llguidance's own
integration) and `truth` (real bytes, no forcing: the yardstick for "legal"). Beside the PR, the
candidate patches of `patches/candidates/` (the registry: `candidates`), each the PR plus one
change and named for it: `nospecial` (0004: `tokenize_fn` without special-token parsing, and a
fourth probe), `failclosed` (0005: on a mask error only end-of-generation is allowed, where the
PR's sampler drops the grammar) and `ownbridge` (0007: `sentinel`'s design in the C++, in place of
the PR's probe, falling back to the PR's greedy path where `sentinel` refuses the vocab). A bridge
says what the sampler does on a mask error (`after_mask_error`), since that is where `failclosed`
differs. A *sampler* is the compiled
counterpart of a bridge of the same name: llama.cpp's own llguidance sampler, built from one tree
(`native`, `llama_server`).

Every bridge exposes the same small interface (`token_bytes`, `tokenize`, `new_matcher`; an
`llg.Matcher` has `allowed`, `consume`), so an analysis runs over any of them without knowing
which it has. `make_bridge(vocab, name)` is the one entry point; `COMPARED` names the bridges a reviewer
compares by default, `CANDIDATE_BRIDGES` the candidate patches', `NAMES` all of them and `truth`.

Building a tokenizer walks the whole vocab (about a second for 256k tokens): cache it.
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from collections.abc import Callable
from typing import Any

import llama_cpp
import numpy as np

from . import candidates
from .errors import InputError
from .llg import LlgTokenizeFn, LlgTokenizerInit, Matcher, lib
from .probe import PROBES, ProbeResult, probe_tokenize_exact
from .vocab import MAX_PIECE, Vocab

_FAILURES = threading.Lock()
SPECIAL_MARKER = b"\xff"  # llguidance's prefix for special tokens (common/llguidance.cpp:179)
LLAMA_TOKEN_NULL = -1


def llama_tok_eos(vocab: Vocab) -> int:
    """llama.cpp's `tok_eos` for llguidance: EOT, else EOS (common/llguidance.cpp:148-151)."""
    tok = vocab.eot
    if tok == LLAMA_TOKEN_NULL:
        tok = vocab.eos
    return tok


def _table(vocab: Vocab, primary: Callable[[int, int], bytes], fallback: Callable[[int, int], bytes]) -> list[bytes]:
    """The loop of common/llguidance.cpp:161-186 with its two conversion calls as parameters.

    `primary(token, max_len)` gives the token's bytes; when it gives nothing (a control or
    unknown token), `fallback` is asked with special-token rendering and the result gets the
    `\\xff` marker. A piece longer than the 1024-byte slot raises ValueError where upstream
    aborts the process (GGML_ABORT).
    """
    out: list[bytes] = []
    for t in range(vocab.n_tokens):
        b = primary(t, MAX_PIECE)
        if not b:
            s = fallback(t, MAX_PIECE - 1)
            if s:
                b = SPECIAL_MARKER + s
        out.append(b)
    return out


def _piece_table(vocab: Vocab) -> list[bytes]:
    """The PR's table: `llama_token_to_piece(t, 0, false)`, else `(t, 0, true)` behind the marker."""
    return _table(
        vocab,
        lambda t, n: vocab.token_to_piece(t, 0, False, n),
        lambda t, n: vocab.token_to_piece(t, 0, True, n),
    )


class Bridge:
    """One llguidance tokenizer built from a vocab by one variant."""

    name: str = "?"

    def __init__(
        self,
        vocab: Vocab,
        token_bytes: list[bytes],
        forcing: bool,
        greedy: bool,
        probe: ProbeResult | None = None,
        tok_eos: int | None = None,
    ) -> None:
        """`forcing`: hand llguidance this bridge's `_tokenize_cb` as `tokenize_fn`. Byte
        forcing follows from it, since `can_force_bytes()` is `tokenize_fn.is_some()` (guide
        3.3); without it llguidance never tokenizes on the mask path. `greedy` is
        `use_approximate_greedy_tokenize_fn`. `tok_eos` defaults to llama.cpp's choice, EOT
        else EOS."""
        self.vocab = vocab
        self.token_bytes = token_bytes
        self.forcing = forcing
        self.greedy = greedy
        self.probe = probe
        self._cb = LlgTokenizeFn(self._tokenize_cb) if forcing else LlgTokenizeFn()
        lens = (ctypes.c_uint32 * len(token_bytes))(*map(len, token_bytes))
        blob = b"".join(token_bytes)
        data = (ctypes.c_uint8 * max(1, len(blob))).from_buffer_copy(blob or b"\0")
        init = LlgTokenizerInit(
            vocab_size=vocab.n_tokens,
            tok_eos=(llama_tok_eos(vocab) if tok_eos is None else tok_eos) & 0xFFFFFFFF,
            token_lens=lens,
            token_bytes=data,
            tokenizer_json=None,
            tokenize_assumes_string=True,
            tokenize_fn=self._cb,
            use_approximate_greedy_tokenize_fn=greedy,
            tokenize_user_data=None,
            slices=None,
        )
        err = ctypes.create_string_buffer(1024)
        handle = lib.llg_new_tokenizer(ctypes.byref(init), err, len(err))
        if not handle:
            msg = err.value.decode("utf-8", "replace").strip() or "unknown error"
            raise InputError(vocab.path, f"llguidance refused the {self.name} token table: {msg}")
        self._handle = handle
        weakref.finalize(self, lib.llg_free_tokenizer, handle)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.vocab.name!r}, forcing={self.forcing}, greedy={self.greedy})"

    # -- the tokenize_fn callback --------------------------------------------------------------
    callback_failures = 0  # calls where `tokenize_fn` raised and the callback returned no tokens
    parse_special = True  # the last argument of tokenize_fn's llama_tokenize (false in `nospecial`)

    def tokenize_fn(self, data: bytes) -> list[int]:
        """What the callback hands llguidance: `llama_tokenize(add_special=false,
        parse_special=true)` (common/llguidance.cpp:123-137)."""
        return self.vocab.tokenize(data, add_special=False, parse_special=self.parse_special)

    def _tokenize_cb(
        self, _user: int, data: ctypes.c_void_p, n: int, out: ctypes._Pointer[ctypes.c_uint32], out_len: int
    ) -> int:
        # returns the number of tokens needed, which may exceed out_len (llguidance asks again)
        try:
            toks = self.tokenize_fn(ctypes.string_at(data, n))
        except Exception:  # noqa: BLE001 - an exception must not cross into Rust
            with _FAILURES:  # matchers of one bridge may run on several threads
                self.callback_failures += 1
            return 0
        for i in range(min(len(toks), out_len)):
            out[i] = toks[i]
        return len(toks)

    # -- interface ----------------------------------------------------------------------------
    def tokenize(self, data: bytes) -> list[int]:
        """What llguidance gets when it tokenizes bytes (`llg_tokenize_bytes`)."""
        buf = (ctypes.c_uint8 * max(1, len(data))).from_buffer_copy(data or b"\0")
        n = lib.llg_tokenize_bytes(self._handle, buf, len(data), None, 0)
        out = (ctypes.c_uint32 * max(1, n))()
        lib.llg_tokenize_bytes(self._handle, buf, len(data), out, n)
        return list(out[:n])

    def new_matcher(self, grammar: str, kind: str = "lark") -> Matcher:
        return Matcher(self._handle, self.vocab.n_tokens, grammar, kind, owner=self)

    # -- the sampler on a mask error ----------------------------------------------------------
    fails_closed = False

    def after_mask_error(self) -> np.ndarray:
        """The ids the sampler allows from the step whose mask llguidance could not compute on.
        As shipped and in the PR, `llama_sampler_llg_apply` logs the error, frees the matcher and
        returns (common/llguidance.cpp:48-58): every token, the grammar dropped."""
        return np.arange(self.vocab.n_tokens)


class Upstream(Bridge):
    """llama.cpp as shipped: `common/llguidance.cpp:123-199` (pre-fix).

    - token bytes: `llama_detokenize(vocab, &token, 1, dp, 1024, false, false)` (:169); when
      empty, again with `unparse_special=true` behind a `\\xff` marker (:173-182);
    - `tokenize_fn` = `llama_tokenize(..., add_special=false, parse_special=true)` (:123-137);
    - `tokenize_assumes_string=true`, `use_approximate_greedy_tokenize_fn=false` (:194-196);
    - `tok_eos` = EOT, else EOS (:148-151).

    But: upstream aborts the process on an oversized piece; here it is a ValueError.
    """

    name = "upstream"

    def __init__(self, vocab: Vocab) -> None:
        table = _table(
            vocab,
            lambda t, n: vocab.detokenize([t], False, False, n),
            lambda t, n: vocab.detokenize([t], False, True, n),
        )
        super().__init__(vocab, table, forcing=True, greedy=False)


class Fixed(Bridge):
    """The PR's fix (guide 4.5 and 5.3), on top of the same loop.

    - token bytes: `llama_token_to_piece(vocab, token, dp, 1024, 0, false)`; the special-token
      fallback is `llama_token_to_piece(..., 0, true)` behind the same `\\xff` marker;
    - the three-probe `llama_sampler_llg_tokenize_is_exact`; `tokenize_fn` is kept only when
      it says exact, else `use_approximate_greedy_tokenize_fn=true`.
    """

    name = "fixed"

    def __init__(self, vocab: Vocab) -> None:
        table = _piece_table(vocab)
        probe = probe_tokenize_exact(vocab)
        super().__init__(vocab, table, forcing=probe.exact, greedy=not probe.exact, probe=probe)


def special_probe(vocab: Vocab) -> bytes | None:
    """Candidate 0004's fourth probe: `a` + the end-of-turn token's text (EOT, else EOS, as
    `llama_token_to_piece(special=true)` spells it into a 256-byte buffer) + `b`; None when the vocab
    has no such token or its text is empty or longer than the buffer (the C++ then adds no probe)."""
    t = llama_tok_eos(vocab)
    if t == LLAMA_TOKEN_NULL:
        return None
    try:
        text = vocab.token_to_piece(t, 0, True, 256)
    except InputError:
        return None
    return b"a" + text + b"b" if text else None


class NoSpecial(Fixed):
    """Candidate 0004 on top of the PR (patches/candidates/0004-…): bug C's repair.

    - `tokenize_fn` = `llama_tokenize(..., add_special=false, parse_special=false)`: forced bytes
      that spell a special token's text stay text;
    - the probe: the PR's three plus `special_probe(vocab)`, all tokenized with
      `parse_special=false`; `tokenize_fn` is kept only when all four round-trip, else greedy.
    Token table, `tok_eos` and the rest as the PR.
    """

    name = "nospecial"
    parse_special = False

    def __init__(self, vocab: Vocab) -> None:
        table = _piece_table(vocab)
        extra = special_probe(vocab)
        probe = probe_tokenize_exact(vocab, PROBES if extra is None else (*PROBES, extra), parse_special=False)
        Bridge.__init__(self, vocab, table, forcing=probe.exact, greedy=not probe.exact, probe=probe)


class FailClosed(Fixed):
    """Candidate 0005 on top of the PR (patches/candidates/0005-…): bug D's, and bug B's, repair.

    The tokenizer is the PR's. On a mask error `llama_sampler_llg_apply` sets `failed` and from
    then on sets every logit but those of `llama_vocab_is_eog` tokens to -inf, where the PR's
    sampler drops the grammar.
    """

    name = "failclosed"
    fails_closed = True

    def after_mask_error(self) -> np.ndarray:
        return np.array(self.vocab.eog_tokens, dtype=np.int64)


class Truth(Bridge):
    """Ground truth for legality: the real pieces, byte forcing off (no `tokenize_fn`).

    With no tokenize function llguidance never tokenizes bytes, so its mask comes only from
    walking the token trie of real bytes against the grammar: a token is allowed exactly when
    its real bytes can continue a legal string. Not a bridge anyone ships; the yardstick.
    """

    name = "truth"

    def __init__(self, vocab: Vocab) -> None:
        table = _piece_table(vocab)
        super().__init__(vocab, table, forcing=False, greedy=True)


# llguidance's own llama.cpp integration, `llguidance.llamacpp.lltokenizer_from_vocab`: the
# approach the guide's 5.2 calls unsafe in general (prefix a byte, strip its tokens), ported so
# every analysis measures it beside `upstream` and `fixed`. Building it walks the vocab once more
# than the others (the token attributes) and tries up to 31 sentinel bytes: about a second for
# 256k tokens.
class Sentinel(Bridge):
    """llguidance's own llama.cpp integration, ported field for field (llguidance 1.9.1).

    Mirrors `llguidance.llamacpp.lltokenizer_from_vocab` (Python) and the Rust
    `tokenv_from_llamacpp` / `LlamaTokenizer` it hands over to (`LLTokenizer.from_llamacpp`):

    - token bytes: `llama_token_to_piece(t, lstrip=0, special=True)` for every token, with the
      `\\xff` marker on CONTROL tokens and on USER_DEFINED tokens that look like `<...>`;
    - `tok_eos` = `llama_vocab_eos` (llamacpp.py's default; not EOT as llama.cpp picks);
    - tokenize: `llama_tokenize(add_special=false, parse_special=false)`. When that does not
      give back `b"a"` for `b"a"` (by the token table, llguidance's `trie.decode`), a sentinel
      is chosen: the first byte `b` in 1..31 with a token of exactly `[b]`, no longer token
      starting with `[b]` and none starting with `[b' ', b]`. Every string is then tokenized
      with the sentinel prepended and the sentinel's own tokens (`llama_tokenize([b])`) are
      stripped off the front, after checking they are there. At build time the same two checks
      as llguidance run (`b"a"`, and the sentinel itself, must round-trip); a failure, no
      sentinel, or no EOS (`llama_vocab_eos` = -1) raises InputError with llguidance's message.
    - invalid UTF-8: `tokenize_assumes_string=true` makes llguidance's C API wrap the callback
      in the same `tokenize_with_greedy_fallback` as `LlamaTokenizer::tokenize_bytes`.

    But:
    - it goes through the C API (`llg_new_tokenizer` with a Python callback), not
      `LLTokenizer.from_llamacpp`, so the sentinel logic runs here, in Python;
    - where llguidance panics at run time ("tokenize_with_sentinel failed": the sentinel's
      tokens are not at the front), this callback returns no tokens and counts the event in
      `callback_failures` (an exception must not cross into Rust);
    - only `tokenize_bytes` (parse_special=false) is ported; llguidance's
      `tokenize_bytes_special` (parse_special=true) has no slot in the C API's one callback;
    - the `n_vocab` and `eos_token` overrides and the `slices` argument are not taken
      (llguidance's default slices are used, as for every variant here).

    Mirrored as llguidance has it, not corrected: tokens that are neither CONTROL nor `<...>`
    USER_DEFINED keep their special text unmarked, so an UNKNOWN/UNUSED token (`<unk>`, phi-3's
    `[PAD...]`) reads as that text although its real piece is empty.
    """

    name = "sentinel"
    PIECE_BUFFER = 16 * 1024  # llamacpp.py's buffer_len
    GROW = False  # llamacpp.py raises where a piece does not fit its buffer

    def __init__(self, vocab: Vocab) -> None:
        self.vocab = vocab
        self.tok_eos = vocab.eos
        if self.tok_eos < 0:
            # from_llamacpp takes the EOS as an unsigned id and refuses a missing one (WPM vocabs);
            # llguidance finds out after the table walk, here before it: same result, cheaper
            raise InputError(
                vocab.path,
                "sentinel bridge: llama_vocab_eos is -1; eos_token must be an int or a non-empty list of ints",
            )
        self.token_bytes = self._llg_table(vocab)
        self.sentinel: int | None = None
        self.sentinel_tokens: list[int] = []
        self._choose_sentinel()
        # llguidance's own integration hands llguidance EOS, not llama.cpp's EOT
        super().__init__(vocab, self.token_bytes, forcing=True, greedy=False, tok_eos=self.tok_eos)

    # -- the token table (llamacpp.py) ----------------------------------------------------------
    @classmethod
    def _llg_table(cls, vocab: Vocab) -> list[bytes]:
        control, user = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL, llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED
        out: list[bytes] = []
        for t in range(vocab.n_tokens):
            try:
                piece = vocab.token_to_piece(t, 0, True, cls.PIECE_BUFFER, grow=cls.GROW)
            except ValueError as e:  # llamacpp.py raises ValueError too
                raise InputError(vocab.path, f"sentinel bridge: {e}") from None
            # llamacpp.py calls the deprecated alias llama_token_get_attr: same C function, but
            # its Python wrapper warns once per token
            attr = int(llama_cpp.llama_vocab_get_attr(vocab.llama_vocab, t))
            if attr & control or (attr & user and piece.startswith(b"<") and piece.endswith(b">")):
                piece = SPECIAL_MARKER + piece
            out.append(piece)
        return out

    def _decode(self, tokens: list[int]) -> bytes:
        """llguidance's `TokTrie::decode`: special tokens without their marker, empty as `<[id]>`."""
        out = bytearray()
        for t in tokens:
            b = self.token_bytes[t] if 0 <= t < len(self.token_bytes) else b""
            if not b:
                out += f"<[{t}]>".encode()
            elif b[:1] == SPECIAL_MARKER:
                out += b[1:]
            else:
                out += b
        return bytes(out)

    # -- the sentinel (tokenv_from_llamacpp) ----------------------------------------------------
    def _raw(self, data: bytes) -> list[int]:
        return self.vocab.tokenize(data, add_special=False, parse_special=False)

    def _choose_sentinel(self) -> None:
        if self._decode(self._raw(b"a")) == b"a":
            return  # llama_tokenize is used as it is
        pieces = {b for b in self.token_bytes if b}

        def extended(prefix: bytes) -> bool:
            # TokTrie::has_extensions: the prefix's trie node has a descendant, i.e. a
            # strictly longer token starts with it
            return any(len(b) > len(prefix) and b.startswith(prefix) for b in pieces)

        firsts = {b[:1] for b in pieces if len(b) > 1}  # extended(one), for all 31 bytes in one pass
        for s in range(1, 32):
            one = bytes([s])
            if one in pieces and one not in firsts and not extended(b" " + one):
                self.sentinel = s
                break
        if self.sentinel is None:
            msg = "sentinel bridge: could not find a good sentinel token in the range 1..32"
            raise InputError(self.vocab.path, msg)
        self.sentinel_tokens = self._raw(bytes([self.sentinel]))
        got = self._decode(self.tokenize_fn(b"a"))
        if got != b"a":
            raise InputError(
                self.vocab.path, f"sentinel bridge: tokenizer is not working with the sentinel {self.sentinel} {got!r}"
            )
        got = self._decode(self.tokenize_fn(bytes([self.sentinel])))
        if got != bytes([self.sentinel]):
            raise InputError(
                self.vocab.path,
                f"sentinel bridge: tokenizer is not working with the sentinel (rec) {self.sentinel} {got!r}",
            )

    def tokenize_fn(self, data: bytes) -> list[int]:
        """`LlamaTokenizer::tokenize_with_sentinel`; raises ValueError where llguidance's `ensure!` fails."""
        if not data:
            return []
        if self.sentinel is None:
            return self._raw(data)
        n = len(self.sentinel_tokens)
        res = self._raw(bytes([self.sentinel]) + data)
        if len(res) <= n:
            raise ValueError("tokenize_with_sentinel: res.len() <= sentinel_tokens.len()")
        if res[:n] != self.sentinel_tokens:
            raise ValueError("tokenize_with_sentinel: res[0..sentinel_tokens.len()] != sentinel_tokens")
        return res[n:]


class OwnBridge(Sentinel):
    """Candidate 0007 on top of the PR (patches/candidates/0007-…): `Sentinel`, llguidance's own
    llama.cpp bridge, written into common/llguidance.cpp against the C API in place of the PR's probe.

    As `Sentinel`: the token table (`token_to_piece(special=true)`, the `\\xff` marker by token
    attribute), `tokenize_fn` with `parse_special=false`, the sentinel's choice and its two checks
    at build time, and a callback that gives no tokens where the sentinel's tokens are not at the
    front at run time.

    But, as the C++ has it:
    - `tok_eos` is llama.cpp's (EOT, else EOS; -1 where the vocab has neither), not
      `llama_vocab_eos`, and a vocab without one is not refused;
    - where `Sentinel` refuses the vocab (no sentinel, a failed check or tokenize), no
      `tokenize_fn` and llguidance's greedy tokenizer on the same table: the PR's fallback, said in
      `refusal`;
    - a piece longer than the buffer is asked for again at its size, where llamacpp.py raises.
    """

    name = "ownbridge"
    PIECE_BUFFER = 256  # the C++'s first buffer; with GROW the table does not depend on it
    GROW = True

    def __init__(self, vocab: Vocab) -> None:
        self.vocab = vocab
        self.tok_eos = llama_tok_eos(vocab)
        self.token_bytes = self._llg_table(vocab)
        self.sentinel = None
        self.sentinel_tokens = []
        self.refusal = ""  # why llguidance's own bridge would refuse the vocab; "" where it builds
        try:
            self._choose_sentinel()
        except ValueError as e:  # InputError from the choice, ValueError from a sentinel check
            self.sentinel, self.sentinel_tokens = None, []
            self.refusal = (e.cause if isinstance(e, InputError) else str(e)).removeprefix("sentinel bridge: ")
        exact = not self.refusal
        Bridge.__init__(self, vocab, self.token_bytes, forcing=exact, greedy=not exact, tok_eos=self.tok_eos)


COMPARED: tuple[str, ...] = ("upstream", "fixed", "sentinel")  # the bridges a reviewer compares
# patches/candidates/, beside the PR (the registry: candidates.py)
CANDIDATE_BRIDGES: tuple[str, ...] = candidates.NAMES
NAMES: tuple[str, ...] = (*COMPARED, *CANDIDATE_BRIDGES, "truth")


def bridge_class(name: str) -> Callable[[Vocab], Bridge]:
    """The class of the bridge called `name`; the one place a bridge name is checked."""
    classes: dict[str, Callable[[Vocab], Bridge]] = {
        "upstream": Upstream,
        "fixed": Fixed,
        "sentinel": Sentinel,
        "nospecial": NoSpecial,
        "failclosed": FailClosed,
        "ownbridge": OwnBridge,
        "truth": Truth,
    }
    if name not in classes:
        raise InputError(f"bridge {name!r}", f"unknown bridge; choose one of {', '.join(NAMES)}")
    return classes[name]


def make_bridge(vocab: Vocab, name: str) -> Bridge:
    """Build the named bridge's llguidance tokenizer for `vocab`."""
    return bridge_class(name)(vocab)


_KEPT: list[Vocab] = []  # the vocab whose bridges `shared` keeps: one at a time (`keep`)
_BUILT: dict[str, Bridge | InputError] = {}  # its bridges by name, or why one could not be built


def keep(vocab: Vocab | None) -> None:
    """Keep the bridges `shared` builds on `vocab` from now on (a kernel's loaded input,
    `nb.cached_vocab`); those of the vocab kept before are dropped. None: keep none."""
    _KEPT[:] = [vocab] if vocab is not None else []
    _BUILT.clear()


def shared(vocab: Vocab, name: str) -> Bridge:
    """`make_bridge(vocab, name)`, built once while `vocab` is the one kept (`keep`), else built.

    Bridges are not changed by use (matchers are separate objects), so the analyses of one vocab,
    and the judge of its generations, can share them; an InputError (a bridge that cannot be built)
    is remembered and raised again."""
    if not _KEPT or _KEPT[0] is not vocab:
        return make_bridge(vocab, name)
    if name not in _BUILT:
        try:
            _BUILT[name] = make_bridge(vocab, name)
        except InputError as e:
            _BUILT[name] = e
    got = _BUILT[name]
    if isinstance(got, InputError):
        raise got
    return got


def failed_rows(vocab: str, build_errors: dict[str, str]) -> list[dict[str, Any]]:
    """A row per bridge that could not be built for the vocab, with its one-line reason."""
    return [{"vocab": vocab, "bridge": name, "build_error": msg} for name, msg in build_errors.items()]
