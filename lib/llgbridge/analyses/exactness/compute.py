"""Tokenize exactness (guide 5.2, 5.3, 10 #2, #4): does what llguidance tokenizes spell its input?

llguidance requires its tokenizer to return exactly the bytes it was given (guide 2, 5.3). The
PR decides this with three probes; here it is measured on many seeded inputs instead.

- `inputs(seed, n)`: random byte strings (invalid UTF-8 included), whitespace runs, leading
  spaces, words, special-token text (`<s>`, ...), and the test texts of the `.inp` files the
  fixture manifest lists (`inp_texts`; never whatever else lies in data/vocabs/).
- `exactness(bridge, inputs)`: for each input, the tokens llguidance gets (`Bridge.tokenize` =
  `llg_tokenize_bytes`: the `tokenize_fn` with llguidance's greedy fallback for invalid UTF-8,
  or llguidance's greedy tokenizer when the bridge has none) and their real bytes
  (`llama_token_to_piece(lstrip=0, special=false)`, joined). Inexact = those bytes differ from
  the input. The shortest failures are minimized by deleting bytes (deterministic).
  It also counts how often the tokens differ from the *canonical tokenization in context*:
  see `canonical`.
- `probe_vs_exactness(vocab)`: the PR's three-probe verdict against the verdict of the
  inputs on `llama_tokenize` as upstream's `tokenize_fn` hands it to llguidance, as a
  confusion row.

But:
- "exact" is judged by the real pieces, so a special token parsed out of text (`<s>` with
  parse_special=true) counts as a failure: its piece is empty, and llguidance would force a
  control token where the grammar asks for the text;
- inputs are short (a few words, or an `.inp` text of at most 256 bytes), so effects that need
  long contexts are out of reach; minimization keeps byte-minimal witnesses, not every cause;
- the canonical tokenization in context is one definition among several (see `canonical`).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, cast

from ...bridges import Bridge, make_bridge
from ...errors import InputError
from ...fixtures import manifest
from ...paths import VOCABS
from ...probe import ProbeResult, probe_tokenize_exact
from ...vocab import Vocab
from . import ExactnessPayload

SPECIAL_TEXTS: tuple[bytes, ...] = (
    b"<s>",
    b"</s>",
    b"<unk>",
    b"<|endoftext|>",
    b"<|eot_id|>",
    b"<|begin_of_text|>",
    b"<|im_start|>",
    b"<|im_end|>",
    b"[CLS]",
    b"<start_of_turn>",
    b"<bos>",
)
WHITESPACE = b" \t\n"
# words and non-ASCII text that the fixtures tokenize with pieces of several sizes
WORDS: tuple[bytes, ...] = tuple(
    w.encode() for w in ("a", "The", "hello", "world", "1", "42", "é", "héllo", "wörld", "中文", "🦙", "x", "{", '"k"')
)
CONTEXTS: tuple[bytes, ...] = (b"x", b"\n")  # see `canonical`
N_MINIMIZED = 5
INP_SEPARATOR = b"\n__ggml_vocab_test__\n"  # between the texts of a `.inp` file, and after the last
MAX_INP = 256  # longer texts make minimization slow and add little


@cache
def inp_texts() -> tuple[bytes, ...]:
    """The distinct test texts (up to MAX_INP bytes) of the `.inp` files in the fixture manifest.

    The manifest, not a glob: a file dropped into data/vocabs/ must not change the inputs.
    """
    out: set[bytes] = set()
    for name in sorted(n for n in manifest() if n.endswith(".inp")):
        p = VOCABS / name
        if not p.exists():
            raise InputError(p, "no such file (run `make data`)")
        out.update(c for c in p.read_bytes().split(INP_SEPARATOR) if 0 < len(c) <= MAX_INP)
    return tuple(sorted(out))


def _random_bytes(rng: random.Random) -> bytes:
    # biased towards ASCII so the inputs look a bit like text, with some bytes >= 0x80
    pool = b"abcxyzABC019 .,!?<>\n\t" + bytes(range(0x80, 0x100, 7))
    return bytes(rng.choice(pool) if rng.random() < 0.8 else rng.randrange(256) for _ in range(rng.randint(1, 12)))


def _whitespace(rng: random.Random) -> bytes:
    run = bytes(rng.choice(WHITESPACE) for _ in range(rng.randint(1, 6)))
    return rng.choice([run, run + rng.choice(WORDS), rng.choice(WORDS) + run + rng.choice(WORDS)])


def _leading_space(rng: random.Random) -> bytes:
    return b" " * rng.randint(1, 3) + b" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))


def _words(rng: random.Random) -> bytes:
    sep = rng.choice([b"", b" ", b"\n", b"  "])
    return sep.join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))


def _special(rng: random.Random) -> bytes:
    s = rng.choice(SPECIAL_TEXTS)
    return rng.choice([s, s + b"hi", b"hi" + s, b" " + s, s + s])


def inputs(seed: int = 0, n: int = 300, texts: tuple[bytes, ...] | None = None) -> list[bytes]:
    """`n` distinct non-empty inputs, the same for the same seed and `texts` (the kinds in turn).

    `texts` are the whole-text inputs, `inp_texts()` by default.
    """
    texts = inp_texts() if texts is None else texts

    def text(rng: random.Random) -> bytes:
        return rng.choice(texts) if texts else _words(rng)

    generators = (_random_bytes, _whitespace, _leading_space, _words, _special, text)
    rng = random.Random(seed)
    seen: set[bytes] = set()
    out: list[bytes] = []
    tries = 0
    while len(out) < n and tries < 50 * n:
        b = generators[tries % len(generators)](rng)
        tries += 1
        if b and b not in seen:
            seen.add(b)
            out.append(b)
    return out


# -- the measures -------------------------------------------------------------------------------
def valid_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def is_exact(bridge: Bridge, data: bytes) -> bool:
    return bridge.vocab.real_bytes(bridge.tokenize(data)) == data


def canonical(vocab: Vocab, text: bytes) -> list[int] | None:
    """llama.cpp's tokenization of `text` in the middle of a text, or None where it has none.

    Definition: for the first context `c` in CONTEXTS (`b"x"`, then `b"\\n"`) such that
    `llama_tokenize(c)` is a prefix of `llama_tokenize(c + text)` and the rest of the tokens
    spells exactly `text` by real bytes, that rest (add_special=false, parse_special=false:
    the text is text). A context keeps SPM's space prefix away from `text`; where a piece would
    span the boundary (`x` + `yz` -> `xyz`), or llama.cpp cannot spell `text` at all (invalid
    UTF-8 becomes U+FFFD), that context gives nothing and the next is tried.
    """
    for c in CONTEXTS:
        head = vocab.tokenize(c, add_special=False, parse_special=False)
        toks = vocab.tokenize(c + text, add_special=False, parse_special=False)
        rest = toks[len(head) :]
        if toks[: len(head)] == head and vocab.real_bytes(rest) == text:
            return rest
    return None


def minimize(pred: Callable[[bytes], bool], data: bytes) -> bytes:
    """Greedy byte deletion: drop chunks (halves, quarters, ..., single bytes) while `pred` holds.

    Deterministic: chunks are tried left to right, largest first, until no single byte can go.
    """
    size = max(1, len(data) // 2)
    while True:
        i, changed = 0, False
        while i < len(data):
            cand = data[:i] + data[i + size :]
            if cand and pred(cand):
                data, changed = cand, True
            else:
                i += size
        if size > 1:
            size //= 2
        elif not changed:
            return data


@dataclass
class Failure:
    input: bytes
    got: bytes  # the real bytes of the tokens
    tokens: list[int]
    minimized: bytes  # a byte-minimal input that still fails
    minimized_got: bytes


@dataclass
class ExactnessResult:
    vocab: str
    bridge: str
    tokenizer: str  # "tokenize_fn" or "greedy" (llguidance's own greedy tokenizer)
    n: int
    failures: list[bytes]  # inexact inputs, in input order
    shortest: list[Failure]  # the N_MINIMIZED shortest failures, minimized
    canon_defined: int  # inputs with a canonical tokenization in context
    canon_differing: list[bytes]  # ... whose tokens differ from it, in input order
    special_failures: int  # inexact inputs whose tokens include one with an empty piece (a parsed special token)

    @property
    def canon_differs(self) -> int:
        return len(self.canon_differing)

    @property
    def canon_differs_utf8(self) -> int:
        """Of `canon_differs`, inputs that are valid UTF-8 (no greedy fallback involved)."""
        return sum(map(valid_utf8, self.canon_differing))

    @property
    def fail_rate(self) -> float:
        return len(self.failures) / self.n if self.n else 0.0

    @property
    def exact_rate(self) -> float:
        return 1.0 - self.fail_rate

    @property
    def canon_diff_rate(self) -> float:
        return self.canon_differs / self.canon_defined if self.canon_defined else 0.0

    def row(self) -> dict[str, Any]:
        return {
            "vocab": self.vocab,
            "bridge": self.bridge,
            "tokenizer": self.tokenizer,
            "inputs": self.n,
            "inexact": len(self.failures),
            "exact_rate": round(self.exact_rate, 4),
            "minimized": " | ".join(repr(f.minimized) for f in self.shortest),
            "canon_defined": self.canon_defined,
            "canon_differs": self.canon_differs,
            "canon_diff_rate": round(self.canon_diff_rate, 4),
            "canon_differs_utf8": self.canon_differs_utf8,
            "special_failures": self.special_failures,
        }


def tokenizer_label(bridge: Bridge) -> str:
    return "greedy" if not bridge.forcing else "tokenize_fn"


def exactness(bridge: Bridge, inputs: list[bytes], n_minimized: int = N_MINIMIZED) -> ExactnessResult:
    """Exactness and canonical agreement of what llguidance tokenizes, over `inputs`."""
    v = bridge.vocab
    failures: list[bytes] = []
    got_of: dict[bytes, tuple[list[int], bytes]] = {}
    defined = special = 0
    differing: list[bytes] = []
    for data in inputs:
        toks = bridge.tokenize(data)
        got = v.real_bytes(toks)
        if got != data:
            failures.append(data)
            got_of[data] = (toks, got)
            special += any(not v.token_to_piece(t) for t in toks)
        canon = canonical(v, data)
        if canon is not None:
            defined += 1
            if canon != toks:
                differing.append(data)
    shortest: list[Failure] = []
    # distinct witnesses: many failures minimize to the same few bytes; a bounded number of tries
    for data in sorted(set(failures), key=lambda b: (len(b), b))[: 4 * n_minimized]:
        if len(shortest) == n_minimized:
            break
        small = minimize(lambda b: not is_exact(bridge, b), data)
        if all(f.minimized != small for f in shortest):
            toks, got = got_of[data]
            shortest.append(Failure(data, got, toks, small, v.real_bytes(bridge.tokenize(small))))
    return ExactnessResult(
        vocab=v.name,
        bridge=bridge.name,
        tokenizer=tokenizer_label(bridge),
        n=len(inputs),
        failures=failures,
        shortest=shortest,
        canon_defined=defined,
        canon_differing=differing,
        special_failures=special,
    )


# -- the PR's probe against the inputs -----------------------------------------------------------
@dataclass
class ProbeVsExactness:
    vocab: str
    vocab_type: str
    probe: ProbeResult
    inputs_exact: bool  # upstream's tokenize_fn was exact on every input
    n: int
    inexact: int
    special_failures: int  # of the inexact, those where a special token was parsed out of text
    witness: bytes | None  # where the verdicts disagree: the shortest input showing it
    witness_got: bytes | None
    # inexact inputs that llguidance hands `tokenize_fn` as they are: valid UTF-8 (with
    # tokenize_assumes_string it tokenizes invalid bytes greedily itself) and no special token parsed
    text_failures: int = 0
    text_witness: bytes | None = None

    @property
    def agree(self) -> bool:
        return self.probe.exact == self.inputs_exact

    @property
    def cell(self) -> str:
        """The confusion-matrix cell; "exact" is the positive class."""
        return {
            (True, True): "both exact",
            (False, False): "both inexact",
            (True, False): "probe misses (keeps an inexact tokenize_fn)",
            (False, True): "probe over-cautious (drops an exact tokenize_fn)",
        }[(self.probe.exact, self.inputs_exact)]

    def row(self) -> dict[str, Any]:
        return {
            "vocab": self.vocab,
            "vocab_type": self.vocab_type,
            "probe_exact": self.probe.exact,
            "failed_probe": "" if self.probe.failed_probe is None else repr(self.probe.failed_probe),
            "inputs_exact": self.inputs_exact,
            "inputs_inexact": f"{self.inexact}/{self.n}",
            "inexact_only_specials": self.inexact == self.special_failures,
            "agree": self.agree,
            "cell": self.cell,
            "witness": "" if self.witness is None else repr(self.witness),
            "witness_got": "" if self.witness_got is None else repr(self.witness_got),
            "inexact_text": f"{self.text_failures}/{self.n}",
            "text_witness": "" if self.text_witness is None else repr(self.text_witness),
        }


def text_failure(bridge: Bridge, data: bytes) -> bool:
    """An input llguidance passes to `tokenize_fn` whole (valid UTF-8) that comes back with other
    bytes, no special token among its tokens."""
    if not valid_utf8(data) or is_exact(bridge, data):
        return False
    return all(bridge.vocab.token_to_piece(t) for t in bridge.tokenize(data))


def probe_vs_exactness(
    vocab: Vocab, upstream: Bridge | None = None, data: list[bytes] | None = None, seed: int = 0, n: int = 300
) -> ProbeVsExactness:
    """The PR's verdict on `llama_tokenize` against the verdict of the inputs on the same function.

    The inputs' side is upstream's `tokenize_fn` (`llama_tokenize(add_special=false,
    parse_special=true)`) as llguidance calls it. Where the probe says exact but an input
    fails, the witness is the minimized shortest failure; where the probe says inexact but no
    input fails, the witness is the failing probe.
    """
    up = upstream if upstream is not None else make_bridge(vocab, "upstream")
    data = data if data is not None else inputs(seed, n)
    r = exactness(up, data, n_minimized=1)
    probe = probe_tokenize_exact(vocab)
    inputs_exact = not r.failures
    witness = got = None
    if probe.exact and not inputs_exact:
        witness, got = r.shortest[0].minimized, r.shortest[0].minimized_got
    elif not probe.exact and inputs_exact:
        witness, got = probe.failed_probe, probe.got
    text = [d for d in r.failures if text_failure(up, d)]
    shortest = min(text, key=lambda b: (len(b), b), default=None)
    return ProbeVsExactness(
        vocab.name,
        vocab.vocab_type,
        probe,
        inputs_exact,
        r.n,
        len(r.failures),
        r.special_failures,
        witness,
        got,
        len(text),
        None if shortest is None else minimize(lambda b: text_failure(up, b), shortest),
    )


def payload(
    vocab: str,
    bridges: list[str],
    built: dict[str, Bridge],
    build_errors: dict[str, str],
    exact: dict[str, ExactnessResult],
    pvx: ProbeVsExactness,
    n_inputs: int,
    seed: int,
) -> ExactnessPayload:
    """The exactness notebook's result: a row per bridge (built or not), the exactness rows, the probe against them."""
    rows = [
        {
            "vocab": vocab,
            "bridge": name,
            "built": name in built,
            "build_error": build_errors.get(name, ""),
            "tokenize_exact_rate": round(exact[name].exact_rate, 4) if name in exact else "",
            "tokenizer": exact[name].tokenizer if name in exact else "",
            "forcing": built[name].forcing if name in built else "",
        }
        for name in bridges
    ]
    out = {
        "n_inputs": n_inputs,
        "seed": seed,
        "bridges": rows,
        "exactness": [r.row() for r in exact.values()],
        "probe_vs_exactness": pvx.row(),
    }
    return cast(ExactnessPayload, out)


__all__ = [
    "inputs",
    "inp_texts",
    "exactness",
    "canonical",
    "minimize",
    "probe_vs_exactness",
    "payload",
    "ExactnessResult",
    "ProbeVsExactness",
]
