"""What if: every per-vocab analysis on a GGUF file of your own, in a report of its own.

    python -m llgbridge.whatif path/to/file.gguf [--name NAME] [-p NAME VALUE ...]
    make whatif VOCAB=path/to/file.gguf [PARAMS='-p grammar "start: /[a-z]+/"']

Runs the census, leak, forced-mask, probe, exactness, soundness and native notebooks on the file,
and the matrix and the real llama-server on a synthetic model made from its tokenizer, then writes a self-contained report under
`reports/whatif/NAME/` (index.html, pr-review-tables.md, tables/*.csv, the executed notebooks).
The main report is not touched. A `-p` parameter goes to every notebook that has it.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from . import params as P
from . import report, run
from .errors import InputError
from .paths import DATA, REPORTS, name_problem, usable_name, vocab_name
from .vocab import check_gguf_file

# native: llama.cpp's own test and the port against the compiled sampler, on this vocab; server: the
# real llama-server on the synthetic model the matrix builds (both skipped with one line where
# nothing could be compiled)
ANALYSES = ("census", "leak", "forced", "probe", "exactness", "soundness", "matrix", "native", "server")


def notebook_parameters(notebook: str) -> set[str]:
    """Names assigned in a notebook's tagged parameters cell."""
    return set(P.declared(notebook))


def safe_name(path: Path) -> str:
    """The report's name for a file given without --name: the name it was given by (a link's own
    name, not its target's: a link to a fixture must not take the fixture's name and write over its
    report), every character an input name cannot hold replaced (`my vocab:2.gguf` ->
    `my_vocab_2`), a letter outside ASCII spelled as its code point (`模型.gguf` -> `u6a21u578b`)."""
    spelled = "".join(c if c.isascii() else f"u{ord(c):04x}" for c in vocab_name(path))
    name = usable_name(spelled).lstrip("-._") or "vocab"
    return name[:128]


def whatif(
    path: Path,
    name: str | None = None,
    params: dict[str, object] | None = None,
    out: Path | None = None,
    models_dir: Path | None = None,
) -> list[dict[str, object]]:
    """Run every analysis on `path`; the report goes to `out` (default reports/whatif/NAME).

    InputError, before anything runs, for a file that is not GGUF, a NAME that could not name a
    folder (`../..`), or a parameter no notebook takes or one that takes it refuses.
    """
    check_gguf_file(path)
    given = bool(name)
    name = name or safe_name(path)
    path = path.resolve()
    why = name_problem(name)
    if why:
        raise InputError("NAME" if given else path, why)
    out = out or REPORTS / "whatif" / name
    results = out / "results"
    params = params or {}
    accepted = {n: notebook_parameters(n) for n in ANALYSES}
    for key in params:
        if not any(key in accepted[n] for n in ANALYSES):
            raise InputError(f"parameter {key}", f"no analysis notebook takes it ({', '.join(ANALYSES)})")
    runs = []
    for nb in ANALYSES:
        p = {k: v for k, v in params.items() if k in accepted[nb]}
        p["vocab_path"] = str(path)
        if nb in ("matrix", "server"):
            p["models_dir"] = str(models_dir or DATA / "whatif" / name / "models")
        P.check(nb, {"vocab": name, **p})  # every refusal before the first kernel starts
        runs.append((nb, p))
    statuses = []
    run.fast_imports()
    # one kernel for every analysis (run.Worker): the file is loaded and its bridges built once
    # (the kernel's output goes to a log meanwhile: `w.say` is the terminal)
    with run.Worker(out, results) as w:
        for i, (nb, p) in enumerate(runs, 1):
            w.say(f"[whatif {name} {i}/{len(ANALYSES)}] {nb} ...")
            statuses += w.run_vocab(name, [nb], {nb: p})
    report.build(results, out)
    print(f"what-if report: {out / 'index.html'}")
    return statuses


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", type=Path)
    ap.add_argument("--name", default=None)
    ap.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    ap.add_argument("--params", default="", help="-p options as one string, split as a shell would (make whatif PARAMS=...)")
    a = ap.parse_args(argv)
    try:
        # split here, never by a shell: PARAMS comes from the user's command line
        extra = shlex.split(a.params)
        if len(extra) % 3 or any(extra[i] != "-p" for i in range(0, len(extra), 3)):
            raise InputError("PARAMS", f"expected -p NAME VALUE ..., got {a.params!r}")
        pairs = [*a.p, *((extra[i + 1], extra[i + 2]) for i in range(0, len(extra), 3))]
        statuses = whatif(a.path, a.name or None, {k: P.parse_value(v) for k, v in pairs})
    except ValueError as e:  # InputError, or shlex's unbalanced quote
        print(f"whatif: {e}", file=sys.stderr)
        return 2
    failed = [s for s in statuses if s["status"] != "ok"]
    for s in failed:
        print(f"FAILED {s['notebook']}: {s['error']}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

