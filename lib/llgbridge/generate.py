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

Prompts: a synthetic model gets plain text (`Output:`) with its BOS; a real instruct model gets
each case's instruction rendered through the chat template in its own GGUF by llama-cpp-python's
Jinja2 chat formatter, tokenized as its chat handler does (special tokens parsed, BOS only when
the template did not add one); a real pretrained model (Gemma 3 270M) gets a plain completion
prompt, since its template is absent and it answers nothing through one. No server.

Loading: every model is loaded with `use_extra_bufts = false`. llama-cpp-python built from source
on a CPU that reports AMX compiles ggml's AMX kernels in (`-march=native`), and decoding a
quantized model then dies with SIGSEGV in `ggml_backend_amx_mul_mat`; without the extra buffer
types (AMX, repack) ggml runs the plain CPU kernels. `llama_cpp.Llama` does not expose the field,
so `load_model` sets it while the model is loaded.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import loaded, nb
from .bridges import Bridge
from .errors import InputError, LlgError, first_line
from .grammars import FORCED_LITERAL, json_grammar, literal_grammar
from .llg import Matcher, apply_mask, mask_bits
from .modelfile import ModelFile
from .overrides import Override, check_log, llama_cpp_python, parse_all
from .vocab import _LOAD_ERRORS, _OVERRIDE_LOG, Vocab, _load_failure


@dataclass(frozen=True)
class Case:
    name: str
    grammar: str  # a lark grammar, as the server hands it to llama_sampler_init_llg
    check: Callable[[str], bool]  # the independent judge of a finished output
    description: str
    could_continue: Callable[[str], bool] | None = None  # for truncated outputs, when decidable
    instruction: str = ""  # what a real instruct model is asked, through its chat template
    completion: str = ""  # the plain prompt a real pretrained model continues


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
NO_SPACE_RE = r"[a-z]{1,10}(,[a-z]{1,10}){2}"


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
        instruction=f"Reply with exactly these two words in lowercase and nothing else: {FORCED_LITERAL}",
        completion='The first program everyone writes prints two words, "',
    ),
    "json_enum": Case(
        "json_enum",
        json_grammar({**JSON_SCHEMA, **JSON_OPTIONS}),
        _json_ok,
        "a JSON schema with an enum string and a bounded integer, as the server sends it",
        instruction="Reply with a JSON object giving a colour and a count.",
        completion='A JSON object giving a colour and a count: {"colour": "red", "count": 3}\nAnother one: ',
    ),
    "half_free": Case(
        "half_free",
        'start: "BEGIN[" /[a-z]{1,8}/ "] END"',
        lambda s: re.fullmatch(HALF_FREE_RE, s) is not None,
        "a forced skeleton around a free regex region",
        _half_free_prefix,
        instruction="Name one animal in lowercase, written as BEGIN[name] END, and nothing else.",
        completion="Animals, one per line, as BEGIN[name] END:\nBEGIN[cat] END\n",
    ),
    "dots": Case(
        "dots",
        'start: /[.]{2,6}/ "!"',
        lambda s: re.fullmatch(r"[.]{2,6}!", s) is not None,
        "a regex region of dots only: built so that upstream's space-stripped tokens (' .', ' ..') are a real choice",
        lambda s: re.fullmatch(r"[.]{0,6}!?", s) is not None,
        instruction="Reply with three dots followed by an exclamation mark, and nothing else.",
        completion="Three dots and then an exclamation mark: ",
    ),
    "no_space": Case(
        "no_space",
        f"start: /{NO_SPACE_RE}/",
        lambda s: re.fullmatch(NO_SPACE_RE, s) is not None,
        "three words separated by commas and no space: where a real model wants ', ' the grammar forbids the space",
        lambda s: re.fullmatch(r"([a-z]{1,10},){0,2}[a-z]{0,10}", s) is not None,
        instruction="List three colours, separated by commas, on one line.",
        completion="The three primary colours, separated by commas: ",
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
    forward_seconds: float = 0.0  # llama_decode on one token at a time, as llama.cpp's perf counters time it
    n_forward: int = 0
    forward_ms: list[float] = field(default_factory=list)  # each one-token decode, from the same counters

    @property
    def decode_tok_s(self) -> float:
        """Tokens per second after the first (which also pays for the prompt)."""
        t = self.token_times
        return (len(t) - 1) / (t[-1] - t[0]) if len(t) >= 2 and t[-1] > t[0] else 0.0


@contextmanager
def _no_extra_bufts() -> Iterator[None]:
    """`llama_model_default_params()` with `use_extra_bufts = false` while a model is loaded:
    `Llama.__init__` takes its model parameters from that call and offers no other way in."""
    from llama_cpp import llama as llama_module

    bindings = llama_module.llama_cpp
    default = bindings.llama_model_default_params

    def params() -> Any:
        p = default()
        p.use_extra_bufts = False
        return p

    bindings.llama_model_default_params = params
    try:
        yield
    finally:
        bindings.llama_model_default_params = default


def load_model(
    model: Path | ModelFile,
    n_gpu_layers: int = 0,
    seed: int = 0,
    n_ctx: int = 512,
    n_threads: int = 2,
    overrides: Iterable[str | Override] = (),
) -> Any:
    """A `llama_cpp.Llama` without ggml's extra buffer types (see the module's docstring), with
    llama.cpp's key `overrides` (`KEY=TYPE:VALUE`) through llama-cpp-python's `kv_overrides`; one
    that llama.cpp did not take, or that stops the load, is refused in one line naming it. A
    model given as its `ModelFile` is not read again; a path is read here."""
    import llama_cpp

    m = model if isinstance(model, ModelFile) else ModelFile.read(model)
    m.require_generative()
    path = m.path
    ovs = parse_all(overrides)
    _LOAD_ERRORS.clear()
    _OVERRIDE_LOG.clear()
    loaded.note(path)
    try:
        with _no_extra_bufts():
            llm = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=n_threads,
                # llama-cpp-python's default for the prompt's batch is every core: two threads
                # that wait on each other at each op, so a job beside it on 2 cores (make -j2
                # report) made a 135M model's matrix 44 s instead of 8
                n_threads_batch=n_threads,
                n_gpu_layers=n_gpu_layers,
                seed=seed,
                verbose=False,
                kv_overrides=llama_cpp_python(ovs),
            )
    except ValueError:
        # llama.cpp's own reason (an architecture it cannot run, ...), not llama-cpp-python's
        # "Failed to load model from file: <absolute path>"
        why = _load_failure(path)
        if ovs:
            raise InputError(f"{path.name} with {', '.join(o.text for o in ovs)}", why.cause) from None
        raise why from None
    loaded.confirm(path)
    if ovs:
        check_log(ovs, "".join(_OVERRIDE_LOG), path.name)
    if llm.model_params.use_extra_bufts:  # a llama-cpp-python that builds its parameters another way
        raise InputError(
            path, "use_extra_bufts could not be turned off: decoding a quantized model may crash in ggml's AMX kernels"
        )
    return llm


@dataclass(frozen=True)
class Prompt:
    text: str
    kind: str  # "plain", "chat template" or "completion": how it was made, for the tables
    parse_special: bool = False  # a rendered chat template holds special-token text
    add_bos: bool = True


PLAIN = Prompt("Output:", "plain")


PROMPT_STYLES = ("auto", "plain", "chat", "completion")


def prompt_style(llm: Any, style: str, synthetic: bool, instruct: bool | None) -> str:
    """What `auto` means for a model: plain text for a synthetic model (random weights: a chat
    template would change nothing but the prompt's length); for a real model of `models`, the
    chat template if it is an instruct model, else completion; for a user's model (`instruct`
    None), the chat template when its GGUF has one, else plain text."""
    if style not in PROMPT_STYLES:
        raise InputError("parameter prompt", f"{style!r} is not one of {', '.join(PROMPT_STYLES)}")
    if style != "auto":
        return style
    if synthetic:
        return "plain"
    if instruct is None:
        return "chat" if llm.metadata.get("tokenizer.chat_template") else "plain"
    return "chat" if instruct else "completion"


def prompt_for(llm: Any, case: Case, style: str) -> Prompt:
    """The prompt of `case` in a resolved style (`prompt_style`)."""
    return PLAIN if style == "plain" else case_prompt(llm, case, instruct=style == "chat")


def case_prompt(llm: Any, case: Case, instruct: bool) -> Prompt:
    """A real model's prompt for `case`: the instruction through the chat template in the
    model's GGUF (rendered by llama-cpp-python's Jinja2 chat formatter), or the plain
    completion prompt for a pretrained model."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    if not instruct:
        return Prompt(case.completion, "completion")
    template = llm.metadata.get("tokenizer.chat_template")
    if not template:
        raise InputError(llm.model_path, "an instruct model without tokenizer.chat_template: cannot render its prompts")

    def text(token: int) -> str:
        return llm.detokenize([token], special=True).decode("utf-8", "replace") if token >= 0 else ""

    fmt = Jinja2ChatFormatter(template=template, eos_token=text(llm.token_eos()), bos_token=text(llm.token_bos()))
    r = fmt(messages=[{"role": "user", "content": case.instruction}])
    # as llama-cpp-python's chat handler tokenizes it (chat_formatter_to_chat_completion_handler)
    return Prompt(r.prompt, "chat template", parse_special=True, add_bos=not r.added_special)


def generate(
    llm: Any,
    vocab: Vocab,
    matcher: Matcher | None,
    prompt: Prompt = PLAIN,
    max_tokens: int = 64,
    temperature: float = 0.0,
    seed: int = 0,
) -> Generation:
    """One generation; `matcher=None` is unconstrained."""
    import llama_cpp

    g = Generation()
    state: dict[str, Any] = {"m": matcher, "t_eval": 0.0}
    llm.set_seed(seed)
    llama_cpp.llama_perf_context_reset(llm.ctx)
    t0 = time.perf_counter()
    toks = llm.tokenize(prompt.text.encode(), add_bos=prompt.add_bos, special=prompt.parse_special)
    procs = llama_cpp.LogitsProcessorList([_mask_processor(llm, g, state)])
    for tok in llm.generate(
        toks, temp=temperature, top_k=40, top_p=0.95, min_p=0.05, repeat_penalty=1.0, logits_processor=procs
    ):
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
    perf = llama_cpp.llama_perf_context(llm.ctx)
    g.forward_seconds, g.n_forward = perf.t_eval_ms / 1000, int(perf.n_eval)
    return g


def _mask_processor(llm: Any, g: Generation, state: dict[str, Any]) -> Callable[[Any, np.ndarray], np.ndarray]:
    """The logits processor of one generation (`g`): each decode's time from llama.cpp's counters,
    and the mask of the matcher `state["m"]` (None: unconstrained) applied to its logits."""
    import llama_cpp

    def apply(_ids: Any, logits: np.ndarray) -> np.ndarray:
        # the decode that made these logits, from llama.cpp's own counters (the prompt's is apart)
        t_eval = llama_cpp.llama_perf_context(llm.ctx).t_eval_ms
        if t_eval > state["t_eval"]:
            g.forward_ms.append(t_eval - state["t_eval"])
        state["t_eval"] = t_eval
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
        # in place on llama.cpp's candidate logits: no copy (llg.apply_mask, timed in make bench)
        apply_mask(logits, mask)
        g.mask_seconds += time.perf_counter() - t
        g.n_masks += 1
        return logits

    return apply


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
    prompt: str = PLAIN.kind  # how the prompt was made (Prompt.kind)
    tokens: list[int] = field(default_factory=list)
    mask_ms_per_token: float = 0.0
    forward_ms_per_token: float = 0.0
    seconds: float = 0.0
    decode_tok_s: float = 0.0

    def row(self) -> dict[str, Any]:
        """The tidy, deterministic columns (timings are kept apart).

        A real model's text and its length are not: its quantized kernels are chosen by the CPU
        (the venv is built with -march=native), so at temperature 0 a near-tie breaks another
        way on another machine of the same kind, inside the grammar too (Gemma 3 270M's
        `no_space`: 'raphael,red,andblueare' here, 'ellow,blue,andredarea' there). Its row keeps
        what the grammar decides (outcome, llguidance errors); the text is in the result's
        `outputs` (`payload`), not in a committed table. A synthetic model's is kept as recorded
        (`recorded_output`)."""
        kept = self.synthetic
        return {
            "model": self.model,
            "vocab": self.vocab,
            "synthetic": self.synthetic,
            "prompt": self.prompt,
            "case": self.case,
            "bridge": self.bridge,
            "outcome": self.outcome,
            "llg_errors": self.llg_errors,
            "greedy": self.greedy,
            "n_tokens": self.n_tokens if kept else 0,
            "output": self.output if kept else "",
            "error": self.error,
        }


TAIL_TOKENS = 8  # kept after the first violation, marked as a tail


_TRUTH: list[tuple[Vocab, Bridge]] = []  # one vocab at a time: the previous vocab and its bridge are freed
_TRUTH_LOCK = threading.Lock()


def _truth(vocab: Vocab) -> Bridge:
    """The truth bridge of `vocab`, built once and shared: a bridge is not changed by use (each
    caller walks a matcher of its own), and the load test's threads ask for it at once."""
    with _TRUTH_LOCK:
        if not _TRUTH or _TRUTH[0][0] is not vocab:
            # the kernel's own truth bridge where `vocab` is the one its analyses loaded (`nb.bridge`)
            _TRUTH[:] = [(vocab, nb.bridge(vocab, "truth"))]
        return _TRUTH[0][1]


def first_violation(vocab: Vocab, grammar: str, tokens: list[int]) -> int | None:
    """The index of the first token whose real bytes the grammar does not allow there, or None.

    Judged by the truth bridge (real pieces, no forcing): the point where the text stopped
    being a prefix of anything the grammar admits.
    """
    m = _truth(vocab).new_matcher(grammar)
    for i, t in enumerate(tokens):
        try:
            if not mask_bits(m.mask(), m.n_tokens)[t]:
                return i
            m.consume(t)
        except LlgError:
            return i
    return None


def recorded_output(vocab: Vocab, case: Case, g: Generation) -> str:
    """What the matrix records of an output: all of it when it never broke the grammar; else the
    text up to the first violation, then `TAIL_TOKENS` tokens marked as a tail.

    After a violation the text is whatever the model writes unconstrained; on random weights its
    near-ties break differently on another CPU, so the full text would not reproduce elsewhere.
    """
    text = g.output.decode("utf-8", "backslashreplace")
    if len(g.tokens) <= TAIL_TOKENS:
        return text  # a violation anywhere leaves at most TAIL_TOKENS after it: all of the text is kept
    at = first_violation(vocab, case.grammar, g.tokens)
    if at is None or len(g.tokens) - at <= TAIL_TOKENS:
        return text
    head = vocab.real_bytes(g.tokens[:at]).decode("utf-8", "backslashreplace")
    tail = vocab.real_bytes(g.tokens[at : at + TAIL_TOKENS]).decode("utf-8", "backslashreplace")
    return f"{head}{tail}…[{len(g.tokens) - at - TAIL_TOKENS} more tokens after the first violation at token {at}]"


@dataclass(frozen=True)
class Sampling:
    """How a case's generation samples: at most `max_tokens` tokens, at `temperature`, from `seed`."""

    max_tokens: int = 64
    temperature: float = 0.0
    seed: int = 0


GREEDY = Sampling()  # the matrix's defaults: 64 tokens at temperature 0


def run_case(
    llm: Any,
    model_name: str,
    vocab: Vocab,
    synthetic: bool,
    bridge: Bridge,
    case: Case,
    sampling: Sampling = GREEDY,
    prompt: Prompt = PLAIN,
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
            output=recorded_output(vocab, case, g) if g else "",
            error=error or (first_line(g.llg_errors[0]) if g and g.llg_errors else ""),
            prompt=prompt.kind,
            tokens=g.tokens if g else [],
            mask_ms_per_token=1000 * g.mask_seconds / g.n_masks if g and g.n_masks else 0.0,
            forward_ms_per_token=1000 * g.forward_seconds / g.n_forward if g and g.n_forward else 0.0,
            seconds=g.seconds if g else 0.0,
            decode_tok_s=g.decode_tok_s if g else 0.0,
        )

    try:
        m = bridge.new_matcher(case.grammar)
    except InputError as e:
        return row("error", None, str(e))
    g = generate(llm, vocab, m, prompt, sampling.max_tokens, sampling.temperature, sampling.seed)
    return row(judge(case, g), g)
