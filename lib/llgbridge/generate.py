"""One generation, judged: the matrix's row of a model, a bridge and a case.

`run_case` generates (`generation`) and judges (`judge`) one case (`cases`) on one bridge, and
keeps what the matrix tabulates (`MatrixRow`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .bridges import Bridge
from .cases import CASES, Case
from .errors import InputError, first_line
from .generation import GREEDY, PLAIN, Generation, Prompt, Sampling, generate, load_model, prompt_for, prompt_style
from .judge import judge, recorded_output
from .vocab import Vocab

# CASES, load_model, prompt_for, prompt_style (and Case, Generation, Prompt, judge) are read here
# still by the other engines' end-to-end analysis (`analyses.engines_e2e`) and its test, which move
# to the modules that hold them (`cases`, `generation`, `judge`) in a change of their own
__all__ = [
    "CASES",
    "Case",
    "Generation",
    "MatrixRow",
    "Prompt",
    "judge",
    "load_model",
    "prompt_for",
    "prompt_style",
    "run_case",
]


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
