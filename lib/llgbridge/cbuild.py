"""Build `llgbridge._llamacall` (`_llamacall.c`: llama.h's per-token vocab calls, bound for
CPython; `vocab.py` calls them) with `cc`, against the headers and the libllama that
llama-cpp-python installed, so the binding and the bindings run the same native code.

    python -m llgbridge.cbuild        # make setup runs it

Writes `lib/llgbridge/_llamacall.so` (`.so` is a suffix CPython imports an extension by); a
failed compile leaves the previous build, never half of one.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sysconfig
from pathlib import Path

HERE = Path(__file__).parent
SOURCE = HERE / "_llamacall.c"
TARGET = HERE / "_llamacall.so"


def llama_dirs() -> tuple[Path, Path]:
    """(include dir with llama.h, lib dir with libllama.so) of the installed llama-cpp-python."""
    dist = importlib.metadata.distribution("llama_cpp_python")
    package = Path(str(dist.locate_file("llama_cpp")))
    lib = package / "lib"
    headers = [Path(str(f.locate())) for f in dist.files or [] if f.name == "llama.h"]
    include = headers[0].parent if headers else package.parent / "include"
    for need in (include / "llama.h", lib / "libllama.so"):
        if not need.exists():
            raise SystemExit(f"{need}: not installed by llama-cpp-python; reinstall it from source (make setup)")
    return include, lib


def build_llamacall() -> Path:
    include, lib = llama_dirs()
    tmp = TARGET.with_name(".llamacall.tmp.so")
    cmd = [
        "cc",
        "-O2",
        "-Wall",
        "-shared",
        "-fPIC",
        f"-I{sysconfig.get_paths()['include']}",
        f"-I{include}",
        str(SOURCE),
        f"-L{lib}",
        f"-Wl,-rpath,{lib}",
        "-lllama",
        "-o",
        str(tmp),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise SystemExit(f"{SOURCE.name}: cc failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    os.replace(tmp, TARGET)
    return TARGET


if __name__ == "__main__":
    build_llamacall()
