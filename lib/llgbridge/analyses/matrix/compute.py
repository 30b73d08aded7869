"""The end-to-end model matrix (guide 8): every model x bridge x case through `generate`, and its result.

The notebook checks its parameters and calls `model_files` then `run`; everything between (the
model loads, the prompts, the warm-up, the unconstrained baseline, the bridges, the cases and
their timings) is here, so the notebook holds no loop and the result is built from one object.
Each model enters as its `ModelFile`, its header read once (`model_files`), and goes on as that value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import llama_cpp

from ... import cases as C
from ... import catalogue, models, nb, synth
from ... import generate as R
from ... import generation as G
from ...errors import InputError
from ...inputs import Input
from ...modelfile import ModelFile
from ...overrides import Override, model_label
from ...paths import resolve
from ...vocab import Vocab
from . import MatrixPayload


@dataclass(frozen=True)
class Settings:
    """The matrix's parameters beside its input (the notebook's, checked)."""

    cases: list[str]
    bridges: list[str]
    prompt: str = "auto"  # auto, plain, chat or completion (`generation.prompt_style`)
    temperature: float = 0.0
    seed: int = 0
    max_tokens: int = 64
    n_gpu_layers: int = 0
    n_threads: int = 1


@dataclass
class Matrix:
    """What one input's matrix ran and measured."""

    paths: list[Path]
    settings: Settings
    device: str = "CPU"
    prompts: dict[str, G.Prompt] = field(default_factory=dict)  # the last model's, by case
    rows: list[R.MatrixRow] = field(default_factory=list)
    timing: list[dict[str, Any]] = field(default_factory=list)
    build_errors: dict[str, str] = field(default_factory=dict)  # the last model's bridges not built

    def payload(self) -> MatrixPayload:
        """The matrix notebook's result (`results.SCHEMAS["matrix"]`): settings, cases and their
        prompts, a row per (model, case, bridge), the tokens and the text of each (a real model's
        only here: `MatrixRow.row`), and the timings kept apart."""
        s = self.settings
        out = {
            "models": [str(p.name) for p in self.paths],
            "device": self.device,
            "n_gpu_layers": s.n_gpu_layers,
            "temperature": s.temperature,
            "seed": s.seed,
            "max_tokens": s.max_tokens,
            "cases": {
                c: {
                    "grammar": C.CASES[c].grammar,
                    "description": C.CASES[c].description,
                    "prompt": self.prompts[c].text,
                }
                for c in s.cases
            },
            "rows": [r.row() for r in self.rows],
            "tokens": [r.tokens for r in self.rows],
            "outputs": [r.output for r in self.rows],
            "timing": self.timing,
        }
        return cast(MatrixPayload, out)


def check_cases(cases: list[str]) -> None:
    unknown = [c for c in cases if c not in C.CASES]
    if unknown:
        raise InputError("parameter cases", f"unknown case(s) {unknown}; choose from {list(C.CASES)}")


def model_files(it: Input, models_dir: str, seed: int) -> list[ModelFile]:
    """The model files the matrix runs, each its header read once: the input's model files, a real
    model's (one line naming its packages when its fetch failed), else the synthetic model around
    the input's tokenizer."""
    if it.models:
        return [ModelFile.read(p) for p in it.files()]
    if it.real:
        return [ModelFile.read(models.model_path(it.name))]
    file = resolve(it.file) if it.file else None
    return [synth.model_file(it.name, resolve(models_dir), seed, file, it.load_overrides())]


def model_paths(it: Input, models_dir: str, seed: int) -> list[Path]:
    """`model_files`' paths."""
    return [m.path for m in model_files(it, models_dir, seed)]


def _device(n_gpu_layers: int) -> str:
    return "GPU" if n_gpu_layers and llama_cpp.llama_supports_gpu_offload() else "CPU"


def run(
    vocab: str, real: bool, files: Sequence[ModelFile | Path], overrides: tuple[Override, ...], s: Settings
) -> Matrix:
    """Every model of `files` x bridge x case; InputError when no bridge could be built at all."""
    models_ = [f if isinstance(f, ModelFile) else ModelFile.read(f) for f in files]
    out = Matrix([m.path for m in models_], s, device=_device(s.n_gpu_layers))
    for m in models_:
        _one_model(out, vocab, real, m, overrides)
    if not out.rows:  # nothing to tabulate: say why rather than fail on an empty table
        why = "; ".join(f"{b}: {e}" for b, e in out.build_errors.items())
        raise InputError(f"matrix for {vocab}", "no bridge could be built: " + why)
    return out


def model_vocab(model: ModelFile, vocab: str, real: bool, overrides: tuple[Override, ...]) -> Vocab:
    """A model's vocab, checked to have text. A real model is the input itself: its vocab and bridges
    are the ones this kernel's analyses of it loaded and built (`nb.cached_vocab`); a synthetic
    model is a file of its own."""
    name = vocab if model.synthetic or real else model.path.stem
    v = nb.cached_vocab(model, name, overrides) if real else Vocab(model, name, overrides)
    v.require_text()  # a vocab whose every token is control or unknown: one line, not a run of empty outputs
    return v


def _one_model(out: Matrix, vocab: str, real: bool, model: ModelFile, overrides: tuple[Override, ...]) -> None:
    s = out.settings
    synthetic = model.synthetic
    name = model_label(model.path.name, overrides)  # the file, and the overrides it is loaded with
    v = model_vocab(model, vocab, real, overrides)
    llm = G.load_model(model, n_gpu_layers=s.n_gpu_layers, seed=s.seed, n_threads=s.n_threads, overrides=overrides)
    chat = G.Chat.of(model, v)
    style = G.prompt_style(chat, s.prompt, synthetic, catalogue.REAL_MODELS[vocab].instruct if real else None)
    out.prompts = {c: G.prompt_for(chat, C.CASES[c], style) for c in s.cases}
    first = out.prompts[s.cases[0]]
    print(f"{name}: {'synthetic' if synthetic else 'real'}, prompts: {first.kind}")
    G.generate(llm, v, None, first, max_tokens=8, temperature=s.temperature, seed=s.seed)  # warm-up, not timed
    base = G.generate(llm, v, None, first, max_tokens=s.max_tokens, temperature=s.temperature, seed=s.seed)
    built, out.build_errors = nb.make_bridges(v, s.bridges)
    sampling = G.Sampling(s.max_tokens, s.temperature, s.seed)
    for bname, err in out.build_errors.items():
        print(f"{bname}: not built for {v.name}: {err}")
    for bname, b in built.items():
        for c in s.cases:
            r = R.run_case(llm, name, v, synthetic, b, C.CASES[c], sampling, out.prompts[c])
            out.rows.append(r)
            out.timing.append(
                {
                    "model": name,
                    "vocab": v.name,
                    "n_vocab": v.n_tokens,
                    "case": c,
                    "bridge": bname,
                    "n_tokens": r.n_tokens,
                    "seconds": r.seconds,
                    "mask_ms_per_token": r.mask_ms_per_token,
                    "forward_ms_per_token": r.forward_ms_per_token,
                    "unconstrained_tok_s": base.decode_tok_s,
                    "constrained_tok_s": r.decode_tok_s,
                }
            )
