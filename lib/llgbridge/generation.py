"""Constrained generation through a bridge, the way llama.cpp's llguidance sampler does it: a
model, a bridge's matcher and a case's prompt in, the tokens and their bytes out.

Follows `common/llguidance.cpp` (vendored by llama-cpp-python 0.3.36):
- apply (`llama_sampler_llg_apply`, :46-68): compute the mask; on failure log llguidance's
  error, free the matcher and return, so every later step is unconstrained (the silent
  drop the guide's 5.1 describes: counted here as `llg_errors`);
- sample: llama-cpp-python's own sampler chain (`Llama.generate` with a logits processor,
  first in the chain), greedy at temperature 0, else seeded;
- accept (`llama_sampler_llg_accept_impl`, :39-44): consume the token, ignoring the result
  as upstream does; a matcher that failed to consume fails at the next apply.

What the output is worth is the judge's (`judge`), by the cases' own checks (`cases`).

Prompts: a synthetic model gets plain text (`Output:`) with its BOS; a real instruct model gets
each case's instruction rendered through the chat template in its own GGUF by llama-cpp-python's
Jinja2 chat formatter, tokenized as its chat handler does (special tokens parsed, BOS only when
the template did not add one); a real pretrained model (Gemma 3 270M) gets a plain completion
prompt, since its template is absent and it answers nothing through one. No server. A prompt is
rendered from the model's `Chat` (the template in its header, its BOS and EOS texts), so whoever
only asks (the server) never loads the weights for it.

Loading: every model is loaded with `use_extra_bufts = false`. llama-cpp-python built from source
on a CPU that reports AMX compiles ggml's AMX kernels in (`-march=native`), and decoding a
quantized model then dies with SIGSEGV in `ggml_backend_amx_mul_mat`; without the extra buffer
types (AMX, repack) ggml runs the plain CPU kernels. `llama_cpp.Llama` does not expose the field,
so `load_model` sets it while the model is loaded. A model is given as its `ModelFile`, its header
read once where it entered (`modelfile`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import loaded
from .cases import Case
from .errors import InputError, LlgError
from .llg import Matcher, apply_mask
from .modelfile import ModelFile
from .overrides import Override, check_log, llama_cpp_python, parse_all
from .vocab import _LOAD_ERRORS, _OVERRIDE_LOG, Vocab, _load_failure


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
    model: ModelFile,
    n_gpu_layers: int = 0,
    seed: int = 0,
    n_ctx: int = 512,
    n_threads: int = 2,
    overrides: Iterable[str | Override] = (),
) -> Any:
    """A `llama_cpp.Llama` without ggml's extra buffer types (see the module's docstring), with
    llama.cpp's key `overrides` (`KEY=TYPE:VALUE`) through llama-cpp-python's `kv_overrides`; one
    that llama.cpp did not take, or that stops the load, is refused in one line naming it. The
    model is given as its `ModelFile`, its header read where it entered."""
    import llama_cpp

    model.require_generative()
    path = model.path
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


@dataclass(frozen=True)
class Chat:
    """What a model's prompts are rendered with: the chat template in its file ("": none) and the
    texts of its BOS and EOS tokens, as llama-cpp-python's chat handler gives them to the template."""

    template: str
    bos: str
    eos: str
    model: str  # the file, as a refusal names it

    @classmethod
    def of(cls, model: ModelFile, vocab: Vocab) -> Chat:
        """From the header read once (`ModelFile.template`) and the model's vocab, no weights loaded."""
        return cls(model.template, _token_text(vocab, vocab.bos), _token_text(vocab, vocab.eos), str(model.path))

    @classmethod
    def of_llm(cls, llm: Any) -> Chat:
        """From a loaded `llama_cpp.Llama`, for whoever holds one and no `Vocab` (guidance's process)."""

        def text(token: int) -> str:
            return llm.detokenize([token], special=True).decode("utf-8", "replace") if token >= 0 else ""

        template = llm.metadata.get("tokenizer.chat_template") or ""
        return cls(template, text(llm.token_bos()), text(llm.token_eos()), str(llm.model_path))


def _token_text(vocab: Vocab, token: int) -> str:
    """A special token's text as `Llama.detokenize([token], special=True)` spells it: its piece,
    less a leading space where it is the BOS token; "" for no token (-1)."""
    if token < 0:
        return ""
    piece = vocab.token_to_piece(token, 0, True, grow=True)
    return (piece[1:] if token == vocab.bos and piece[:1] == b" " else piece).decode("utf-8", "replace")


PROMPT_STYLES = ("auto", "plain", "chat", "completion")


def prompt_style(chat: Chat, style: str, synthetic: bool, instruct: bool | None) -> str:
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
        return "chat" if chat.template else "plain"
    return "chat" if instruct else "completion"


def prompt_for(chat: Chat, case: Case, style: str) -> Prompt:
    """The prompt of `case` in a resolved style (`prompt_style`)."""
    return PLAIN if style == "plain" else case_prompt(chat, case, instruct=style == "chat")


def case_prompt(chat: Chat, case: Case, instruct: bool) -> Prompt:
    """A real model's prompt for `case`: the instruction through the chat template in the
    model's GGUF (rendered by llama-cpp-python's Jinja2 chat formatter), or the plain
    completion prompt for a pretrained model."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    if not instruct:
        return Prompt(case.completion, "completion")
    if not chat.template:
        raise InputError(chat.model, "an instruct model without tokenizer.chat_template: cannot render its prompts")
    fmt = Jinja2ChatFormatter(template=chat.template, eos_token=chat.eos, bos_token=chat.bos)
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


@dataclass(frozen=True)
class Sampling:
    """How a case's generation samples: at most `max_tokens` tokens, at `temperature`, from `seed`."""

    max_tokens: int = 64
    temperature: float = 0.0
    seed: int = 0


GREEDY = Sampling()  # the matrix's defaults: 64 tokens at temperature 0
