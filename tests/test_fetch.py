"""The fetcher on real archives built here: each failure is one line naming the input and the cause,
and nothing ever lies under a final name that is not the manifest's bytes."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest

from llgbridge import fetch
from llgbridge.errors import InputError
from llgbridge.fetch import Manifest
from llgbridge.paths import ROOT

BIG = bytes(range(256)) * (3 * fetch.CHUNK // 256)  # three chunks: a kill can land mid-file


def tarball(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo("pkg-1.0/" + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def manifest(files: dict[str, bytes]) -> Manifest:
    return Manifest.of({n: hashlib.sha256(d).hexdigest() for n, d in files.items()}, "test.sha256")


def extract(archive: Path, dest: Path, want: Manifest) -> list[str]:
    return fetch.extract(archive, dest, want, lambda e: "pkg-1.0/" + e.file)


def test_the_manifest_reads_both_formats_and_writes_them_back() -> None:
    d = "ab" * 32
    text = f"# comment\n{d}  a.gguf\n{d} *b.bin\n{d}\tc.json\tA name\thttps://x/c.json\n"
    m = Manifest.parse(text, "m")
    assert [(e.file, e.fields) for e in m.entries] == [
        ("a.gguf", ()),
        ("b.bin", ()),
        ("c.json", ("A name", "https://x/c.json")),
    ]
    assert dict(m) == {"a.gguf": d, "b.bin": d, "c.json": d}
    assert Manifest.parse(m.text(), "m").entries == m.entries
    with pytest.raises(InputError, match=r"^m line 2: not a `sha256  file` line$"):
        Manifest.parse(f"{d}  ok\nnot-a-digest  x\n", "m")


def test_a_wrong_sha256_places_nothing(tmp_path: Path) -> None:
    files = {"a.bin": b"good", "b.bin": b"tampered"}
    want = Manifest.of({**manifest(files), "b.bin": hashlib.sha256(b"original").hexdigest()}, "test.sha256")
    dest = tmp_path / "dest"
    with pytest.raises(InputError) as e:
        extract(tarball(tmp_path / "p.tar.gz", files), dest, want)
    got = hashlib.sha256(b"tampered").hexdigest()
    assert str(e.value) == (
        f"b.bin: checksum mismatch with test.sha256 (expected {want['b.bin'][:16]}..., got {got[:16]}...); "
        "nothing was placed"
    )
    assert sorted(os.listdir(dest)) == []


def test_a_truncated_archive_is_one_line_and_places_nothing(tmp_path: Path) -> None:
    files = {"a.bin": BIG}
    whole = tarball(tmp_path / "p.tar.gz", files).read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    dest = tmp_path / "dest"
    with pytest.raises(InputError, match=r"^cut.tar.gz: its sdist is not readable: ") as e:
        extract(cut, dest, manifest(files))
    assert "\n" not in str(e.value) and os.listdir(dest) == []


def test_a_missing_member_names_it(tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    with pytest.raises(InputError) as e:
        extract(tarball(tmp_path / "p.tar.gz", {"a.bin": b"a"}), dest, manifest({"a.bin": b"a", "gone.bin": b"g"}))
    assert str(e.value) == "p.tar.gz: its sdist has no pkg-1.0/gone.bin"
    assert os.listdir(dest) == []


def test_a_destination_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"")  # a folder below a file: refused even to root
    dest = tmp_path / "file" / "dest"
    with pytest.raises(InputError) as e:
        extract(tarball(tmp_path / "p.tar.gz", {"a.bin": b"a"}), dest, manifest({"a.bin": b"a"}))
    assert str(e.value) == f"{dest}: cannot write there: Not a directory"


KILL = """
import os, signal, sys
from pathlib import Path
from llgbridge import fetch
from llgbridge.fetch import Manifest
real = fetch.Archive.chunks
def chunks(self, member):
    for i, c in enumerate(real(self, member)):
        if member.endswith("b.bin") and i == 1:
            os.kill(os.getpid(), signal.SIGKILL)  # a crash: no handler, no cleanup runs
        yield c
fetch.Archive.chunks = chunks
want = Manifest.parse(Path(sys.argv[3]).read_text(), "test.sha256")
fetch.extract(Path(sys.argv[1]), Path(sys.argv[2]), want, lambda e: "pkg-1.0/" + e.file)
"""


def test_a_crash_mid_extract_leaves_no_file_under_a_final_name(tmp_path: Path) -> None:
    files = {"a.bin": BIG, "b.bin": BIG[::-1]}
    (tmp_path / "m").write_text(manifest(files).text())
    dest = tmp_path / "dest"
    archive = tarball(tmp_path / "p.tar.gz", files)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "lib")}
    p = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(KILL), str(archive), str(dest), str(tmp_path / "m")], env=env
    )
    assert p.returncode == -9
    left = sorted(os.listdir(dest))
    assert len(left) == 1 and left[0].startswith(".fetch-")  # only the staging folder, half-written inside
    assert sorted(os.listdir(dest / left[0])) == ["a.bin", "b.bin"]
    # the next fetch places both, verified
    assert extract(archive, dest, manifest(files)) == ["a.bin", "b.bin"]
    assert (dest / "b.bin").read_bytes() == files["b.bin"]


def test_a_registry_without_the_package_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    with pytest.raises(InputError, match=r"^nosuchpkg==1\.0: pip download failed: .*No matching distribution"):
        fetch.download("nosuchpkg==1.0", tmp_path / "into", sdist=True)


def test_a_real_wheel_is_found_pinned_and_a_wrong_pin_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # pip's own find-links over a real wheel built here
    links = tmp_path / "links"
    links.mkdir()
    wheel = links / "pkg-1.0-py3-none-any.whl"
    info = "pkg-1.0.dist-info"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", f"{info}/METADATA,,\n{info}/WHEEL,,\n{info}/RECORD,,\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    right = Manifest.of({wheel.name: fetch.sha256(wheel)}, "PIN")
    got = fetch.download_once("pkg==1.0", tmp_path / "cache", right)
    assert got == tmp_path / "cache" / wheel.name and got.read_bytes() == wheel.read_bytes()
    assert os.listdir(tmp_path / "cache") == [wheel.name]
    wrong = Manifest.of({wheel.name: "0" * 64}, "PIN")
    with pytest.raises(InputError) as e:
        fetch.download("pkg==1.0", tmp_path / "again", pinned=wrong)
    assert str(e.value) == (
        f"{wheel.name}: checksum mismatch with PIN (expected 0000000000000000..., got {right[wheel.name][:16]}...)"
    )
