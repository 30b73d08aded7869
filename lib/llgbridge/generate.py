"""Constrained generation through a bridge, the way llama.cpp's llguidance sampler does it.

Follows `common/llguidance.cpp` (vendored by llama-cpp-python 0.3.36):
- apply (`llama_sampler_llg_apply`, :46-68): compute the mask; on failure log llguidance's
  error, free the matcher and return, so every later step is unconstrained (the silent
  drop the guide's 5.1 describes: counted here as `llg_errors`);
- sample: llama-cpp-python's own sampler chain (`Llama.generate` with a logits processor,
  first in the chain), greedy at temperature 0, else seeded;
- accept (`llama_sampler_llg_accept_impl`, :39-44): consume the token, ignoring the result
  as upstream does; a matcher that failed to consume fails at the next apply.

Each output is judged by an independent check (exact string, `json` + `jsonschema`, `re`),
never by llguidance. A run that hits the token limit is `truncated` unless the text already
cannot be completed (the literal case checks that by prefix).

But: no chat template, no server: the prompt is plain text with the model's BOS.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .bridges import Bridge
from .errors import InputError, LlgError, first_line
from .gguf_meta import read_meta
from .grammars import FORCED_LITERAL, json_grammar, literal_grammar
from .llg import Matcher
from .vocab import Vocab

ENCODER_ONLY = {"bert", "nomic-bert", "nomic-bert-moe", "jina-bert-v2", "t5encoder", "neo-bert", "modern-bert"}


@dataclass(frozen=True)
class Case:
    name: str
    grammar: str  # a lark grammar, as the server hands it to llama_sampler_init_llg
    check: Callable[[str], bool]  # the independent judge of a finished output
    description: str
    could_continue: Callable[[str], bool] | None = None  # for truncated outputs, when decidable


JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "colour": {"type": "string", "enum": ["red", "green", "chartreuse"]},
        "count": {"type": "integer", "minimum": 0, "maximum": 99},
    },
    "required": ["colour", "count"],
    "additionalProperties": False,
}
# The server's schema grammar (`grammars.json_grammar`) plus llguidance's compact-whitespace
# option, so a random-weight model cannot loop on whitespace: the one departure from the
# server's defaults.
JSON_OPTIONS = {"x-guidance": {"whitespace_flexible": False}}
HALF_FREE_RE = r"BEGIN\[[a-z]{1,8}\] END"


def _json_ok(text: str) -> bool:
    import jsonschema

    try:
        jsonschema.validate(json.loads(text), JSON_SCHEMA)
    except (ValueError, jsonschema.ValidationError):
        return False
    return True


def _half_free_prefix(s: str) -> bool:
    """Can `s` still grow into a HALF_FREE_RE match?"""
    head = "BEGIN["
    if len(s) <= len(head):
        return head.startswith(s)
    if not s.startswith(head):
        return False
    m = re.match(r"[a-z]{0,8}", s[len(head) :])
    assert m is not None
    rest = s[len(head) + m.end() :]
    return rest == "" or (m.end() >= 1 and "] END".startswith(rest))


CASES: dict[str, Case] = {
    "forced_literal": Case(
        "forced_literal",
        literal_grammar(FORCED_LITERAL),
        lambda s: s == FORCED_LITERAL,
        f"a grammar admitting exactly {FORCED_LITERAL!r}",
        lambda s: FORCED_LITERAL.startswith(s),
    ),
    "json_enum": Case(
        "json_enum",
        json_grammar({**JSON_SCHEMA, **JSON_OPTIONS}),
        _json_ok,
        "a JSON schema with an enum string and a bounded integer, as the server sends it",
    ),
    "half_free": Case(
        "half_free",
        'start: "BEGIN[" /[a-z]{1,8}/ "] END"',
        lambda s: re.fullmatch(HALF_FREE_RE, s) is not None,
        "a forced skeleton around a free regex region",
        _half_free_prefix,
    ),
    "dots": Case(
        "dots",
        'start: /[.]{2,6}/ "!"',
        lambda s: re.fullmatch(r"[.]{2,6}!", s) is not None,
        "a regex region of dots only: built so that upstream's space-stripped tokens (' .', ' ..') are a real choice",
        lambda s: re.fullmatch(r"[.]{0,6}!?", s) is not None,
    ),
}


@dataclass
class Generation:
    tokens: list[int] = field(default_factory=list)
    output: bytes = b""
    stop: str = ""  # "eog", "limit"
    llg_errors: list[str] = field(default_factory=list)
    mask_seconds: float = 0.0  # computing and applying the mask, all steps
    seconds: float = 0.0
    n_masks: int = 0
    token_times: list[float] = field(default_factory=list)  # perf_counter as each token arrives

    @property
    def decode_tok_s(self) -> float:
        """Tokens per second after the first (which also pays for the prompt)."""
        t = self.token_times
        return (len(t) - 1) / (t[-1] - t[0]) if len(t) >= 2 and t[-1] > t[0] else 0.0


def check_generative(path: Path) -> None:
    """Refuse, in one line, a file that cannot generate."""
    meta = read_meta(path)
    if not meta.has_tensors:
        raise InputError(path, "vocab-only file: it has no weights to generate with (use its synthetic model instead)")
    if meta.architecture in ENCODER_ONLY:
        raise InputError(path, f"encoder-only architecture {meta.architecture!r}: it cannot generate text")


def load_model(path: Path, n_gpu_layers: int = 0, seed: int = 0, n_ctx: int = 512) -> Any:
    import llama_cpp

    check_generative(path)
    try:
        return llama_cpp.Llama(
            model_path=str(path), n_ctx=n_ctx, n_threads=2, n_gpu_layers=n_gpu_layers, seed=seed, verbose=False
        )
    except ValueError as e:
        raise InputError(path, f"llama.cpp could not load it: {e}") from None


def generate(
    llm: Any,
    vocab: Vocab,
    matcher: Matcher | None,
    prompt: bytes = b"Output:",
    max_tokens: int = 64,
    temperature: float = 0.0,
    seed: int = 0,
) -> Generation:
    """One generation; `matcher=None` is unconstrained."""
    from llguidance.numpy import apply_token_bitmask_inplace

    g = Generation()
    state: dict[str, Matcher | None] = {"m": matcher}

    def apply(_ids: Any, logits: np.ndarray) -> np.ndarray:
        m = state["m"]
        if m is None:
            return logits
        t = time.perf_counter()
        try:
            mask = m.mask()
        except LlgError as e:
            g.llg_errors.append(str(e))
            state["m"] = None  # llama.cpp frees the matcher: unconstrained from here on
            return logits
        out = np.array(logits, dtype=np.float32)
        apply_token_bitmask_inplace(out, mask.view(np.int32))
        g.mask_seconds += time.perf_counter() - t
        g.n_masks += 1
        return out

    import llama_cpp

    llm.set_seed(seed)
    t0 = time.perf_counter()
    toks = llm.tokenize(prompt, add_bos=True, special=False)
    procs = llama_cpp.LogitsProcessorList([apply])
    for tok in llm.generate(toks, temp=temperature, top_k=40, top_p=0.95, min_p=0.05, repeat_penalty=1.0, logits_processor=procs):
        g.token_times.append(time.perf_counter())
        if llama_cpp.llama_vocab_is_eog(vocab.llama_vocab, tok):
            g.stop = "eog"
            break
        g.tokens.append(int(tok))
        g.output += vocab.token_to_piece(int(tok))
        m = state["m"]
        if m is not None:
            try:
                m.consume(int(tok))
            except LlgError:
                pass  # upstream ignores llg_matcher_consume_token's result; apply fails next
        if len(g.tokens) >= max_tokens:
            g.stop = "limit"
            break
    g.seconds = time.perf_counter() - t0
    return g


def judge(case: Case, g: Generation) -> str:
    text = g.output.decode("utf-8", "replace")
    if g.stop == "limit":
        if case.could_continue is not None and not case.could_continue(text):
            return "violation"
        return "truncated"
    return "pass" if case.check(text) else "violation"


@dataclass
class MatrixRow:
    model: str
    vocab: str
    synthetic: bool
    case: str
    bridge: str
    outcome: str
    llg_errors: int
    greedy: bool
    n_tokens: int
    output: str
    error: str = ""  # the first llguidance error, verbatim first line
    tokens: list[int] = field(default_factory=list)
    mask_ms_per_token: float = 0.0
    seconds: float = 0.0
    decode_tok_s: float = 0.0

    def row(self) -> dict[str, Any]:
        """The tidy, deterministic columns (timings are kept apart)."""
        return {
            "model": self.model,
            "vocab": self.vocab,
            "synthetic": self.synthetic,
            "case": self.case,
            "bridge": self.bridge,
            "outcome": self.outcome,
            "llg_errors": self.llg_errors,
            "greedy": self.greedy,
            "n_tokens": self.n_tokens,
            "output": self.output,
            "error": self.error,
        }


def run_case(
    llm: Any,
    model_name: str,
    vocab: Vocab,
    synthetic: bool,
    bridge: Bridge,
    case: Case,
    max_tokens: int = 64,
    temperature: float = 0.0,
    seed: int = 0,
) -> MatrixRow:
    def row(outcome: str, g: Generation | None, error: str = "") -> MatrixRow:
        return MatrixRow(
            model=model_name,
            vocab=vocab.name,
            synthetic=synthetic,
            case=case.name,
            bridge=bridge.name,
            outcome=outcome,
            llg_errors=len(g.llg_errors) if g else 0,
            greedy=bridge.greedy,
            n_tokens=len(g.tokens) if g else 0,
            output=g.output.decode("utf-8", "backslashreplace") if g else "",
            error=error or (first_line(g.llg_errors[0]) if g and g.llg_errors else ""),
            tokens=g.tokens if g else [],
            mask_ms_per_token=1000 * g.mask_seconds / g.n_masks if g and g.n_masks else 0.0,
            seconds=g.seconds if g else 0.0,
            decode_tok_s=g.decode_tok_s if g else 0.0,
        )

    try:
        m = bridge.new_matcher(case.grammar)
    except InputError as e:
        return row("error", None, str(e))
    g = generate(llm, vocab, m, max_tokens=max_tokens, temperature=temperature, seed=seed)
    return row(judge(case, g), g)
