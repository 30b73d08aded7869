"""The build: the vendored llama.cpp tree extracted from the pinned sdist, patched, and compiled.

`build_native()` extracts the vendored llama.cpp sources from the pinned llama-cpp-python sdist (the one
`make data` fetches), copies them and applies `patches/` (the PR, guide 11) with
`patch -p1 --fuzz=0`, then the candidate patches (`patches/candidates/`) each on top of the PR in a
tree of its own, and compiles with `native/Makefile`: `common/llguidance.cpp` per sampler,
llama.cpp's own `tests/test-grammar-llguidance.cpp` as shipped and as patched, and
`native/harness.cpp` (every sampler linked into one harness), once per llguidance version (the
venv's, and the pinned 1.0.1). They link the venv's `libllama` and the llguidance wheel's C API.
About 30 s on 2 cores the first time; nothing when up to date. The server's build (`llama_server.build_servers`)
reuses the trees and `run_make`.

But: without a C++ compiler, `patch` or a shared libpython, `build_native()` records one line saying so
(data/native/status.json), and everything else runs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

from ...candidates import CANDIDATES as REGISTERED
from ...errors import InputError, first_line
from ...fetch import Archive, Manifest, Staging, download
from ...fixtures import MEMBER_PREFIX, SDIST, fetch_sdist
from ...paths import DATA, ROOT, write_json

NATIVE = DATA / "native"
SHIPPED = NATIVE / "src" / "shipped"
FIXED = NATIVE / "src" / "fixed"
BIN = NATIVE / "bin"
STATUS = NATIVE / "status.json"
PATCHES = ROOT / "patches"
MAKEFILE = ROOT / "native" / "Makefile"

SAMPLERS = ("upstream", "fixed")  # the shipped common/llguidance.cpp, and with the PR
# candidate patches beside the PR (patches/candidates/), each applied on top of it in a tree of its
# own and named for what it does: a sampler each, never replacing `fixed`
PATCH_OF: dict[str, str] = {c.name: c.patch for c in REGISTERED}  # the registry: llgbridge.candidates
CANDIDATE_PATCHES = PATCHES / "candidates"
# what the build needs from the vendored tree: common/ and the public headers for every object,
# nlohmann for common/json.h, and the two test files the PR touches
SOURCE_PREFIXES = (
    "common/",
    "include/",
    "ggml/include/",
    "vendor/nlohmann/",
    "tests/test-grammar-llguidance.cpp",
    "tests/CMakeLists.txt",
    # llama-server (`llama_server.build_servers`): its sources, the mtmd headers it includes (the venv has
    # libmtmd), the UI's templates (no assets), cpp-httplib, the subprocess header and the staging API
    # header common/fit.cpp and speculative.cpp include (libllama exports it)
    "tools/server/",
    "tools/mtmd/mtmd.h",
    "tools/mtmd/mtmd-helper.h",
    "tools/ui/ui.h.in",
    "tools/ui/ui.cpp.in",
    "vendor/cpp-httplib/",
    "vendor/sheredom/",
    "src/llama-ext.h",
)
COMMIT_MEMBER = "llama_cpp_python-0.3.36/.git/modules/vendor/llama.cpp/HEAD"
COMMIT_FILE = "LLAMA_CPP_COMMIT"
TEST_TIMEOUT = 600  # seconds for one test binary on one vocab; gemma-4 (262k tokens) takes about 20


# llguidance as llama.cpp links it (common/CMakeLists.txt: GIT_TAG d795912f..., "v1.0.1")
LLG_PINNED = "1.0.1"
LLG_WHEELS = {  # the wheel pip picks here, and its sha256 as the registry serves it
    "llguidance-1.0.1-cp39-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl": (
        "945ab9c077d35dc8c6a603ea6a3e4f5ba2deeae80a0b3cbfbedd142881fb4262"
    ),
}
LLG_PIN = Manifest.of(LLG_WHEELS, "native/builder.py's LLG_WHEELS")
LLG_DIR = NATIVE / f"llguidance-{LLG_PINNED}"


# -- build -----------------------------------------------------------------------------------
def extract_sources(dest: Path) -> None:
    """The vendored tree's build inputs, from the sdist `make data` caches (checked against its pin), into `dest`."""
    with Archive(fetch_sdist(DATA / "sdist"), SDIST) as sdist:
        sdist.extract_tree(MEMBER_PREFIX, lambda rel: rel.startswith(SOURCE_PREFIXES), dest)
        # the sdist keeps the submodule's git dir: the commit of the vendored tree
        if COMMIT_MEMBER in sdist.names():
            (dest / COMMIT_FILE).write_text(sdist.read(COMMIT_MEMBER).decode().strip() + "\n")


def vendored_commit() -> str:
    """The llama.cpp commit llama-cpp-python vendors (read from its sdist by `build`), or ""."""
    try:
        return (SHIPPED / COMMIT_FILE).read_text().strip()
    except OSError:
        return ""


def patch_files() -> list[Path]:
    """The PR as a series, in the order it applies."""
    return sorted(PATCHES.glob("*.patch"))


def candidate_tree(name: str) -> Path:
    return NATIVE / "src" / name


def apply_patches(tree: Path, dry_run: bool = False, patches: list[Path] | None = None) -> None:
    """Apply `patches/` (or `patches`) to `tree` with no fuzz: a patch that does not apply exactly raises."""
    if not shutil.which("patch"):
        raise RuntimeError("the `patch` program is missing (Debian package `patch`)")
    for p in patch_files() if patches is None else patches:
        cmd = [
            "patch",
            "-p1",
            "--fuzz=0",
            "--forward",
            "--batch",
            "--no-backup-if-mismatch",
            "-d",
            str(tree),
            "-i",
            str(p),
        ]
        if dry_run:
            cmd.append("--dry-run")
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0 or "offset" in r.stdout:
            said = (r.stdout + r.stderr).strip().splitlines()
            raise RuntimeError(f"{p.relative_to(ROOT)} does not apply cleanly: {said[-1] if said else r.returncode}")


def venv_llguidance() -> str:
    from importlib.metadata import version

    return version("llguidance")


def fetch_pinned_llguidance() -> Path:
    """The 1.0.1 wheel's `_lib.abi3.so`, extracted into data/native/llguidance-1.0.1/ (once)."""
    lib = LLG_DIR / "_lib.abi3.so"
    if lib.exists():
        return lib
    with Staging(LLG_DIR) as s:
        wheel = download(f"llguidance=={LLG_PINNED}", s.dir / "pip", pinned=LLG_PIN)
        with Archive(wheel) as z:
            member = next((n for n in z.names() if n.startswith("llguidance/_lib") and n.endswith(".so")), None)
            if member is None:
                raise InputError(wheel.name, "holds no llguidance/_lib*.so")
            s.extract(z, member, lib.name)
        s.commit()
    return lib


def llguidance_libraries() -> tuple[dict[str, Path], dict[str, str]]:
    """({version: the C API's shared library}, {version: why it is missing}): the pinned 1.0.1
    and the venv's."""
    from ...llg import _library_path  # loading llg loads llguidance's library: the build needs only its path

    libs: dict[str, Path] = {venv_llguidance(): _library_path()}
    missing: dict[str, str] = {}
    try:
        libs[LLG_PINNED] = fetch_pinned_llguidance()
    except (InputError, RuntimeError, OSError, subprocess.SubprocessError) as e:
        missing[LLG_PINNED] = first_line(str(e))
    return dict(sorted(libs.items(), key=lambda kv: version_key(kv[0]))), missing


def version_key(v: object) -> tuple[int, ...]:
    """A version's sort key: `1.0.1` before `1.9.1` before `1.10.0`."""
    return tuple(int(x) if x.isdigit() else 0 for x in str(v).split("."))


def _python_link() -> tuple[str, str]:
    """(LIBDIR, library name for -l) of this interpreter's shared libpython."""
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    ldlib = sysconfig.get_config_var("LDLIBRARY") or ""
    if not ldlib.endswith(".so") or not (Path(libdir) / ldlib).exists():
        raise RuntimeError(f"this Python has no shared libpython ({ldlib or 'none'} in {libdir or '?'})")
    return libdir, ldlib.removeprefix("lib").removesuffix(".so")


def make_vars(out: Path, llg_so: Path, root: Path = ROOT) -> dict[str, str]:
    """native/Makefile's variables for a build into `out` linking the llguidance `llg_so`, every
    path as make run in `root` names it (`make_name`) and every library's run-time path as the
    binaries in out/bin find it (`rpath`)."""
    import llama_cpp

    py_libdir, py_lib = _python_link()
    bins = out / "bin"
    trees = {"SHIPPED": SHIPPED, "FIXED": FIXED, **{f"SRC_{name}": candidate_tree(name) for name in PATCH_OF}}
    return {
        **{k: make_name(root / tree.relative_to(ROOT), root) for k, tree in trees.items()},
        "CANDIDATES": " ".join(PATCH_OF),
        "OUT": make_name(out, root),
        **library_vars("LLAMA", Path(llama_cpp.__file__).parent / "lib", bins, root),
        **library_vars("LLG", llg_so.parent, bins, root),
        "LLG_LIB": _checked(llg_so.name, _MAKE_UNSAFE, "make cannot quote in a file name"),
        **library_vars("PY", Path(py_libdir), bins, root),
        "PY_LIB": py_lib,
    }


def prepare_sources() -> None:
    """Shipped and patched trees, rebuilt together whenever a patch is newer than them or the
    list of what is extracted changed (the stamp holds that list)."""
    stamp = NATIVE / "src" / ".complete"
    cands = [CANDIDATE_PATCHES / f for f in PATCH_OF.values()]
    newest = max((p.stat().st_mtime for p in [*patch_files(), *cands] if p.exists()), default=0.0)
    wanted = "\n".join([*SOURCE_PREFIXES, *PATCH_OF]) + "\n"
    try:
        same = stamp.read_text() == wanted and stamp.stat().st_mtime >= newest
    except OSError:
        same = False
    if same:
        return
    (NATIVE / "src").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=NATIVE / "src") as tmp:
        shipped, fixed = Path(tmp) / "shipped", Path(tmp) / "fixed"
        extract_sources(shipped)
        shutil.copytree(shipped, fixed)
        apply_patches(fixed)
        staged_trees = [(SHIPPED, shipped), (FIXED, fixed)]
        for name, patch_name in PATCH_OF.items():
            tree = Path(tmp) / name
            shutil.copytree(fixed, tree)
            apply_patches(tree, patches=[CANDIDATE_PATCHES / patch_name])
            staged_trees.append((candidate_tree(name), tree))
        for final, staged in staged_trees:
            if final.exists():
                shutil.rmtree(final)
            os.replace(staged, final)
    stamp.write_text(wanted)


def check_compiler(what: str) -> str:
    """The C++ compiler (`CXX`, else c++); RuntimeError naming `what` is skipped when there is none."""
    cxx = os.environ.get("CXX", "c++")
    if not shutil.which(cxx):
        raise RuntimeError(f"no C++ compiler ({cxx} not found): {what} are skipped")
    return cxx


# Make splits a file name at whitespace and reads `:`, `#`, `$`, `%` and `;` in one as syntax (no
# quoting helps in a target or a prerequisite), and the recipes' shell reads quotes and backslashes.
# So make runs in the checkout and names every file relative to it (data/native/src/..., .venv/...):
# the folders above the checkout, where a space is common ("my checkout/llgbridge"), never reach it
_MAKE_UNSAFE = re.compile(r"[\s:#$%;'\"\\`]")
# a library's folder is never a target or a prerequisite, only a word of the linker's command line,
# single-quoted there: only a quote, a `$` (make would expand it) or a line break cannot be written
_RECIPE_UNSAFE = re.compile(r"['$\n]")


def _shown(path: Path, root: Path) -> str:
    p, top = Path(os.path.abspath(root / path)), os.path.abspath(root)
    return os.path.relpath(p, top) if p.is_relative_to(top) else str(p)


def make_name(path: Path, root: Path = ROOT) -> str:
    """`path` as make run in `root` names it in a rule: relative when inside `root`, else absolute.
    RuntimeError naming the path when make cannot name it even so (a tree outside the checkout, in
    a folder with a space)."""
    return _checked(_shown(path, root), _MAKE_UNSAFE, "make cannot quote in a file name")


def _checked(name: str, unsafe: re.Pattern[str], why: str) -> str:
    if m := unsafe.search(name):
        said = "a space" if m[0] == " " else repr(m[0])
        raise RuntimeError(f"{name!r} has {said} in it, which {why}; move it to a path without one")
    return name


def rpath(lib_dir: Path, bins: Path, root: Path = ROOT) -> str:
    """Where a binary in `bins` finds `lib_dir` when it runs: relative to the binary (`$ORIGIN`,
    written `$$` for make) when both are in the checkout, so no folder above the checkout is written
    into a binary; else absolute."""
    lib, where, top = (Path(os.path.realpath(p)) for p in (lib_dir, bins, root))
    inside = lib.is_relative_to(top) and where.is_relative_to(top)
    name = os.path.relpath(lib, where) if inside else str(lib)
    return ("$$ORIGIN/" if inside else "") + _checked(name, _RECIPE_UNSAFE, "make cannot pass to the linker")


def library_vars(prefix: str, lib_dir: Path, bins: Path, root: Path = ROOT) -> dict[str, str]:
    """PREFIX_DIR (where the linker finds the library, as make run in `root` names it) and
    PREFIX_RPATH (where the binary will), for the recipes to single-quote."""
    found = _checked(_shown(lib_dir, root), _RECIPE_UNSAFE, "make cannot pass to the linker")
    return {f"{prefix}_DIR": found, f"{prefix}_RPATH": rpath(lib_dir, bins, root)}


def run_make(
    makefile: Path,
    variables: dict[str, str],
    what: str,
    jobs: int | None = None,
    targets: tuple[Path, ...] = (),
    root: Path = ROOT,
) -> None:
    """`make -f makefile VAR=VALUE... targets`, run in `root` (the names in `variables` are `make_name`'s);
    RuntimeError with one line naming `what`: the path make cannot name, or the first error line."""
    try:
        names = [make_name(makefile, root), *(make_name(t, root) for t in targets)]
    except RuntimeError as e:
        raise RuntimeError(f"{what} refused: {e}") from None
    args = [f"{k}={v}" for k, v in variables.items()]
    r = subprocess.run(
        ["make", "-s", "-f", names[0], f"-j{jobs or os.cpu_count() or 1}", *args, *names[1:]],
        capture_output=True,
        text=True,
        cwd=root,
    )
    if r.returncode != 0:
        errs = [ln for ln in r.stderr.splitlines() if "error" in ln.lower()] or r.stderr.strip().splitlines()
        raise RuntimeError(f"{what} failed: {errs[0] if errs else 'make exited ' + str(r.returncode)}")


def build_native(jobs: int | None = None) -> dict[str, Any]:
    """Build everything into data/native/; returns (and writes to status.json) what happened.

    A machine without a C++ compiler, `patch` or a shared libpython gets `{"built": false,
    "reason": ...}`: one line, and the rest of the suite runs without the native parts.
    """
    t0 = time.monotonic()
    status: dict[str, Any] = {"built": False}
    try:
        check_compiler("the native parts")
        prepare_sources()
        libs, missing = llguidance_libraries()
        # once per llguidance: the venv's (what the port drives) into bin/, the pinned one into
        # llg-VERSION/bin/ (each its own objects: a few seconds)
        for version, lib in libs.items():
            out = NATIVE if version == venv_llguidance() else NATIVE / f"llg-{version}"
            run_make(MAKEFILE, make_vars(out, lib), f"native build (llguidance {version})", jobs)
            # one harness now links every sampler: an earlier build's harness per sampler is no part of this one
            for old in (out / "bin").glob("harness-*"):
                old.unlink()
        status = {"built": True, "llguidance": list(libs), "missing": missing}
    except (InputError, RuntimeError, OSError, subprocess.SubprocessError) as e:
        status["reason"] = first_line(str(e))
        # binaries of an earlier build are not what this tree builds now: gone, so every native
        # result that ran them is stale (their sha256 is its code version) and fails with the reason
        for d in [BIN, *NATIVE.glob("llg-*/bin")]:
            shutil.rmtree(d, ignore_errors=True)
    status["seconds"] = round(time.monotonic() - t0, 1)
    write_json(STATUS, status)
    return status


def unavailable() -> str | None:
    """None when the native build is there, else the one-line reason it is not."""
    try:
        status = json.loads(STATUS.read_text())
    except (OSError, ValueError):
        return "the native parts are not built (make native)"
    if not status.get("built"):
        return str(status.get("reason") or "the native build failed")
    missing = [b for b in binaries() if not b.exists()]
    return f"{missing[0].relative_to(ROOT)} is missing (make native)" if missing else None


def bin_dir(llg: str | None = None) -> Path:
    """Where the binaries linked against llguidance `llg` are (None: the venv's)."""
    return BIN if llg in (None, venv_llguidance()) else NATIVE / f"llg-{llg}" / "bin"


def built_versions() -> list[str]:
    """The llguidance versions the native binaries were built against, pinned (1.0.1) first."""
    try:
        status = json.loads(STATUS.read_text())
    except (OSError, ValueError):
        return []
    return [v for v in status.get("llguidance") or [venv_llguidance()] if all(b.exists() for b in binaries(v))]


def binaries(llg: str | None = None) -> list[Path]:
    names = [f"{kind}-{s}" for kind in ("test-shipped", "test-pr") for s in SAMPLERS]
    return [bin_dir(llg) / n for n in [*names, "harness"]]
