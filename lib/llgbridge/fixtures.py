"""Fetch the 19 vocab fixtures from the llama-cpp-python 0.3.36 source distribution.

The sdist vendors llama.cpp's `models/ggml-vocab-*.gguf` (with their `.inp`/`.out` test
texts). It is fetched with `pip download` (the package registry is the only network this needs) and
checked against its pinned sha256, each fixture is checked against the committed manifest
`vocabs.sha256`, and files are moved into place only once verified (`fetch`), so an interrupted or
failed run leaves nothing half-written.

    python -m llgbridge.fixtures data/vocabs      # what `make data` runs
    python -m llgbridge.fixtures --names          # the vocab names (inputsets' VOCABS)

Imports nothing outside the standard library, so `make data` runs it before the virtual
environment has anything installed.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from . import fetch
from .catalogue import REAL_MODELS
from .fetch import Manifest, download_once, place_verified
from .paths import FIXTURE_PREFIX, FIXTURE_SUFFIX, VOCABS, name_problem, vocab_name

SDIST = "llama-cpp-python==0.3.36"
SDIST_FILE = "llama_cpp_python-0.3.36.tar.gz"
MEMBER_PREFIX = "llama_cpp_python-0.3.36/vendor/llama.cpp/"
MANIFEST = Path(__file__).with_name("vocabs.sha256")
# the sdist as the registry serves it: the fixtures are checked one by one against MANIFEST, the
# llama.cpp sources the native build compiles (`native.builder`) only through this
SDIST_PIN = Manifest.of(
    {SDIST_FILE: "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"}, "fixtures.py's SDIST_PIN"
)


def manifest() -> Manifest:
    """file name -> sha256, from the fixtures' manifest."""
    return Manifest.read(MANIFEST)


def vocab_names(extra: Path | None = None) -> list[str]:
    """The manifest's vocab names; with `extra`, also every ggml-vocab-NAME.gguf found there
    whose NAME is usable (`refused` lists the others)."""
    names = {vocab_name(n) for n in manifest() if n.endswith(FIXTURE_SUFFIX)}
    if extra is not None:
        names.update(n for n in _dropped(extra) if not _problem(n))
        names.difference_update(edited(extra))
    return sorted(names)


def edited(extra: Path) -> dict[str, str]:
    """Shipped vocabs in `extra` whose bytes no longer match their manifest sha256 (one edited in
    place), name -> file name: never published under the official name (issue 48, break 9)."""
    want = manifest()
    present = [f for f in want if f.endswith(FIXTURE_SUFFIX) and (extra / f).is_file()]
    return {vocab_name(f): f for f in sorted(present) if fetch.sha256(extra / f) != want[f]}


def _problem(name: str) -> str:
    """Why a dropped-in fixture's `name` cannot name an input, or "": an unusable name, or one a
    real model already holds (`vocab_path` resolves it to the model: the dropped file would be
    listed twice and measured as the model)."""
    why = name_problem(name)
    if why:
        return why
    model = REAL_MODELS.get(name)
    if model is None:
        return ""
    return (
        f"{FIXTURE_PREFIX}{name}{FIXTURE_SUFFIX} claims the name {name!r}, which the real model "
        f"data/models/{model.file} holds (it keeps it)"
    )


def _dropped(extra: Path) -> list[str]:
    # os.fsdecode keeps a non-UTF-8 byte as a lone surrogate, which name_problem then refuses
    return sorted(vocab_name(p) for p in extra.glob(f"{FIXTURE_PREFIX}*{FIXTURE_SUFFIX}"))


def refused(extra: Path = VOCABS) -> list[dict[str, str]]:
    """Files dropped into `extra` whose name cannot name an input, each as a failed input with
    its one-line cause: Make never sees them (a `:` or a space would break its targets, a
    leading `-` would be an option), and the report names them."""
    out = []
    for name in _dropped(extra):
        why = _problem(name)
        if why:
            shown = ascii(FIXTURE_PREFIX + name + FIXTURE_SUFFIX)[1:-1]
            out.append({"notebook": "(all)", "vocab": shown, "error": f"refused file name: {why}; rename the file"})
    for name, f in edited(extra).items():
        why = (
            f"{f}: its sha256 no longer matches lib/llgbridge/{MANIFEST.name} (edited in place?): not published as "
            f"{name}; make whatif VOCAB=... measures your file, make data puts the shipped one back"
        )
        out.append({"notebook": "(all)", "vocab": name, "error": f"refused: {why}"})
    return out


def fetch_sdist(cache: Path) -> Path:
    """The sdist tarball, downloaded once into `cache` and checked against its pinned sha256."""
    return download_once(SDIST, cache, SDIST_PIN, sdist=True, about=f"the {SDIST} source distribution (about 77 MB)")


def extract(sdist: Path, dest: Path, names: Mapping[str, str], members_dir: str = "models/") -> list[str]:
    """Extract the named files, verify each, then move them into `dest`. Returns what was placed."""
    want = Manifest.of(dict(sorted(names.items())), MANIFEST.name)
    return fetch.extract(sdist, dest, want, lambda e: MEMBER_PREFIX + members_dir + e.file)


def ensure(dest: Path, cache: Path | None = None) -> list[Path]:
    """Make sure every fixture of the manifest is in `dest`, verified. Idempotent."""
    want = manifest()
    missing = want.missing(dest)
    if missing:
        sdist = fetch_sdist(cache or dest.parent / "sdist")
        placed = extract(sdist, dest, {n: want[n] for n in missing})
        print(f"placed {len(placed)} fixture files in {dest}", flush=True)
    return [dest / n for n in sorted(want) if n.endswith(".gguf")]


def verify(dest: Path) -> list[str]:
    """Names whose bytes differ from the manifest (empty when all is well)."""
    return sorted(manifest().verify(dest))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--names"]:
        for r in refused(VOCABS):
            print(f"data/vocabs/{r['vocab']}: {r['error']}", file=sys.stderr)
        print(" ".join(vocab_names(extra=VOCABS)))
        return 0
    return place_verified(Path(argv[0] if argv else "data/vocabs"), ensure, verify, "make data")


if __name__ == "__main__":
    raise SystemExit(main())
