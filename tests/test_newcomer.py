"""The newcomer's path (issue 49) and the command line's edge (issue 48): the commands a new user
types first, in a folder like theirs, each refusing a mistake in one line before anything runs,
and what they type never run as code."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import SPM

from llgbridge import native
from llgbridge.llg import _library_path
from llgbridge.paths import ROOT


# -- a checkout whose path has a space (issue 49, 1) --------------------------------------------------
@pytest.mark.slow
def test_the_native_build_runs_in_a_checkout_whose_path_has_a_space(tmp_path: Path) -> None:
    """Make cannot quote a space in a file name, and the build named every file absolutely: in
    `…/my checkout/llgbridge` it refused ("has a space in it … move the checkout") and every native
    and server result failed. Make now runs in the checkout and names its files relative to it, and
    a binary finds the libraries in the checkout relative to itself ($ORIGIN): one of llama.cpp's
    tests, built from such a checkout, runs and answers as the real build's does."""
    if why := native.unavailable():
        pytest.skip(why)
    root = tmp_path / "my checkout" / "llgbridge"
    shutil.copytree(ROOT / "native", root / "native")
    out = root / "data" / "native"
    out.mkdir(parents=True)
    (out / "src").symlink_to(native.NATIVE / "src")  # the extracted trees, as `make native` leaves them
    llg = out / "llg" / _library_path().name  # inside the checkout: found relative to the binary
    llg.parent.mkdir()
    shutil.copy2(_library_path(), llg)
    target = out / "bin" / "test-shipped-upstream"
    native.run_make(
        root / "native" / "Makefile", native.make_vars(out, llg, root), "native build", None, (target,), root
    )
    assert "$ORIGIN/../llg" in subprocess.run(["readelf", "-d", str(target)], capture_output=True, text=True).stdout
    built = subprocess.run([str(target), str(SPM)], capture_output=True, timeout=300, cwd=tmp_path)
    real = subprocess.run([str(native.BIN / target.name), str(SPM)], capture_output=True, timeout=300, cwd=tmp_path)
    assert (built.returncode, built.stdout) == (real.returncode, real.stdout), built.stderr[-2000:]


def test_a_path_make_cannot_name_is_refused_in_one_line_naming_it(tmp_path: Path) -> None:
    """What still cannot reach make (a library outside the checkout, in a folder with a space) is
    refused before make runs, naming the path."""
    outside = tmp_path / "with space" / "lib"
    with pytest.raises(RuntimeError) as e:
        native.library_vars("LLG", outside, ROOT / "data" / "native" / "bin")
    assert str(e.value) == (
        f"{str(outside)!r} has a space in it, which make cannot quote in a file name; move it to a path without one"
    )
