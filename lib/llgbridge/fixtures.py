"""Fetch the 19 vocab fixtures from the llama-cpp-python 0.3.36 source distribution.

The sdist vendors llama.cpp's `models/ggml-vocab-*.gguf` (with their `.inp`/`.out` test
texts). It is fetched with `pip download` (the package registry is the only network this needs),
each fixture is checked against the committed manifest `vocabs.sha256`, and files are moved
into place only once verified, so an interrupted or failed run leaves nothing half-written.

    python -m llgbridge.fixtures data/vocabs      # what `make data` runs
    python -m llgbridge.fixtures --names          # the vocab names `make report` runs on

Imports nothing outside the standard library, so the Makefile can ask for the names before
the virtual environment exists.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from .paths import FIXTURE_PREFIX, FIXTURE_SUFFIX, VOCABS, name_problem, vocab_name

SDIST = "llama-cpp-python==0.3.36"
SDIST_FILE = "llama_cpp_python-0.3.36.tar.gz"
MEMBER_PREFIX = "llama_cpp_python-0.3.36/vendor/llama.cpp/"
MANIFEST = Path(__file__).with_name("vocabs.sha256")


def read_manifest(path: Path) -> dict[str, str]:
    """file name -> sha256, from a committed `sha256sum`-style manifest (`#` lines are comments)."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            digest, name = line.split()
            out[name] = digest
    return out


def manifest() -> dict[str, str]:
    """file name -> sha256, from the fixtures' manifest."""
    return read_manifest(MANIFEST)


def vocab_names(extra: Path | None = None) -> list[str]:
    """The manifest's vocab names; with `extra`, also every ggml-vocab-NAME.gguf found there
    whose NAME is usable (`refused` lists the others)."""
    names = {vocab_name(n) for n in manifest() if n.endswith(FIXTURE_SUFFIX)}
    if extra is not None:
        names.update(n for n in _dropped(extra) if not _problem(n))
    return sorted(names)


def _problem(name: str) -> str:
    """Why a dropped-in fixture's `name` cannot name an input, or "": an unusable name, or one a
    real model already holds (`vocab_path` resolves it to the model: the dropped file would be
    listed twice and measured as the model)."""
    why = name_problem(name)
    if why:
        return why
    from .models import REAL_MODELS  # models imports this module; both stdlib only

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
    return out


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch_sdist(cache: Path) -> Path:
    """The sdist tarball, downloaded once into `cache`."""
    target = cache / SDIST_FILE
    if target.exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        print(f"downloading the {SDIST} source distribution (about 77 MB) ...", flush=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", SDIST, "-d", tmp, "-q"],
            check=True,
        )
        got = Path(tmp) / SDIST_FILE
        if not got.exists():
            raise SystemExit(f"{SDIST}: pip download did not produce {SDIST_FILE}")
        os.replace(got, target)
    return target


def extract(sdist: Path, dest: Path, names: dict[str, str], members_dir: str = "models/") -> list[str]:
    """Extract the named files, verify each, then move them into `dest`. Returns what was placed."""
    dest.mkdir(parents=True, exist_ok=True)
    placed: list[str] = []
    with tempfile.TemporaryDirectory(dir=dest) as tmp, tarfile.open(sdist) as tar:
        staged: list[Path] = []
        for name, digest in sorted(names.items()):
            member = MEMBER_PREFIX + members_dir + name
            try:
                src = tar.extractfile(member)
            except KeyError:
                raise SystemExit(f"{sdist.name}: has no {member}") from None
            if src is None:
                raise SystemExit(f"{sdist.name}: {member} is not a file")
            out = Path(tmp) / name
            with out.open("wb") as f:
                while chunk := src.read(1 << 20):
                    f.write(chunk)
            got = sha256(out)
            if got != digest:
                raise SystemExit(
                    f"{name}: checksum mismatch (expected {digest[:16]}..., got {got[:16]}...); nothing was placed"
                )
            staged.append(out)
        for out in staged:
            os.replace(out, dest / out.name)
            placed.append(out.name)
    return placed


def ensure(dest: Path, cache: Path | None = None) -> list[Path]:
    """Make sure every fixture of the manifest is in `dest`, verified. Idempotent."""
    want = manifest()
    missing = {n: d for n, d in want.items() if not (dest / n).exists()}
    if missing:
        sdist = fetch_sdist(cache or dest.parent / "sdist")
        placed = extract(sdist, dest, missing)
        print(f"placed {len(placed)} fixture files in {dest}", flush=True)
    return [dest / n for n in sorted(want) if n.endswith(".gguf")]


def verify(dest: Path) -> list[str]:
    """Names whose bytes differ from the manifest (empty when all is well)."""
    return [n for n, d in sorted(manifest().items()) if not (dest / n).exists() or sha256(dest / n) != d]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--names"]:
        for r in refused(VOCABS):
            print(f"data/vocabs/{r['vocab']}: {r['error']}", file=sys.stderr)
        print(" ".join(vocab_names(extra=VOCABS)))
        return 0
    return place_verified(Path(argv[0] if argv else "data/vocabs"), ensure, verify, "make data")


def place_verified(
    dest: Path, ensure: Callable[[Path], object], verify: Callable[[Path], list[str]], rerun: str
) -> int:
    """`ensure(dest)`, then `verify(dest)`: the exit status of a fetch command, with one line
    naming the files whose bytes differ from the manifest."""
    ensure(dest)
    bad = verify(dest)
    if bad:
        print(f"{dest}: checksum mismatch for {', '.join(bad)}; delete them and rerun {rerun}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
