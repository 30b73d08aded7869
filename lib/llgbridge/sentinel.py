"""llguidance's own llama.cpp integration as a bridge variant (`sentinel`).

`llguidance.llamacpp.lltokenizer_from_vocab` is the approach the guide's 5.2 calls unsafe in
general (prefix a byte, strip its tokens); this port lets every analysis measure it beside
`upstream` and `fixed`. Building it walks the vocab once more than the others (the token
attributes) and tries up to 31 sentinel bytes: about a second for 256k tokens.
"""

from __future__ import annotations

import llama_cpp

from .bridges import SPECIAL_MARKER, Bridge
from .errors import InputError
from .vocab import Vocab


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
                piece = vocab.token_to_piece(t, 0, True, cls.PIECE_BUFFER)
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
