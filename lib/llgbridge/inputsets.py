"""The input sets `make report` runs the registry's analyses on (`Analysis.runs_on`), by name.

Each set is made of groups of input names, each written once, here (the Makefile names none and
runs nothing while it is read):

- `VOCABS`: every vocab fixture, and any `ggml-vocab-NAME.gguf` dropped into data/vocabs/;
- `REAL_VOCABS`: the real models (`catalogue.REAL_MODELS`);
- `MATRIX_VOCABS`: the fixtures whose tokenizers the synthetic models are made from;
- `CORPUS_SAMPLE_VOCABS`: the fixtures the corpus's seeded sample of schemas runs on.

`make report INPUTS="GROUP=NAMES ..."` replaces groups, as a shell splits it (a smaller report:
the tests, `make bench`'s yardsticks).

    python -m llgbridge.inputsets [--groups "GROUP=NAMES ..."]                 # the sets, by name
    python -m llgbridge.inputsets --make-models [--groups "GROUP=NAMES ..."]   # MATRIX_VOCABS' synthetic models

Standard library only: the pool plans from these before any kernel starts.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Mapping
from difflib import get_close_matches

from .analyses import INPUT_SETS
from .catalogue import REAL_MODELS
from .errors import InputError
from .fixtures import refused, vocab_names
from .paths import MODELS, VOCABS, name_problem

# the synthetic models the matrix, the server and the other engines run on are made from these
MATRIX_VOCABS = ("llama-spm", "phi-3", "baichuan", "llama-bpe", "gemma-4", "qwen35")
# the corpus's seeded sample (40 schemas) runs on the guide's four vocabs; `make corpus` on every one
CORPUS_SAMPLE_VOCABS = ("llama-spm", "llama-bpe", "gemma-4", "bert-bge")
# each set's groups, in order
SETS: dict[str, tuple[str, ...]] = {
    "every": ("VOCABS", "REAL_VOCABS"),
    "matrix": ("MATRIX_VOCABS", "REAL_VOCABS"),
    "server": ("MATRIX_VOCABS", "REAL_VOCABS"),
    "corpus-sample": ("CORPUS_SAMPLE_VOCABS",),
}
GROUPS = ("VOCABS", "REAL_VOCABS", "MATRIX_VOCABS", "CORPUS_SAMPLE_VOCABS")


def groups() -> dict[str, list[str]]:
    """Each group's input names as this checkout has them (the fixtures dropped in included)."""
    return {
        "VOCABS": vocab_names(extra=VOCABS),
        "REAL_VOCABS": list(REAL_MODELS),
        "MATRIX_VOCABS": list(MATRIX_VOCABS),
        "CORPUS_SAMPLE_VOCABS": list(CORPUS_SAMPLE_VOCABS),
    }


def refused_lines() -> list[str]:
    """One line for each file dropped into data/vocabs/ that `VOCABS` leaves out, and why (a name
    that cannot name an input, a fixture edited in place): the report names them as failed inputs."""
    return [f"data/vocabs/{r['vocab']}: {r['error']}" for r in refused(VOCABS)]


def parse(text: str) -> dict[str, list[str]]:
    """`INPUTS="GROUP=NAMES ..."` as a shell splits it: the groups it replaces; InputError in one
    line for an unknown group or a name that cannot name an input."""
    try:
        words = shlex.split(text)
    except ValueError as e:
        raise InputError("INPUTS", str(e)) from None
    out: dict[str, list[str]] = {}
    known: list[str] = []
    for word in words:
        group, eq, names = word.partition("=")
        if not eq or group not in GROUPS:
            raise InputError("INPUTS", f"{word!r}: expected GROUP=NAMES, a GROUP of {', '.join(GROUPS)}")
        if group in out:
            # the second silently replaced the first: which one the user meant is theirs to say
            raise InputError("INPUTS", f"{group} is given twice; give each group once; nothing was run")
        out[group] = names.replace(",", " ").split()
        for name in out[group]:
            if why := name_problem(name):
                raise InputError(f"INPUTS {group}", why)
            # a name no input holds ran every analysis on nothing, each run failing as "its input is
            # gone", and the render then published a report of no inputs over the committed one
            known = known or [*vocab_names(extra=VOCABS), *REAL_MODELS]
            if name not in known:
                close = get_close_matches(name, known, n=1)
                hint = f"did you mean {close[0]}?" if close else f"the inputs: {', '.join(sorted(known))}"
                raise InputError(f"INPUTS {group}", f"no such input: {name} ({hint}); nothing was run")
    return out


def input_sets(replaced: Mapping[str, list[str]] | None = None) -> dict[str, list[str]]:
    """Each set's inputs, every group as `groups` has it unless `replaced` says otherwise."""
    have = {**groups(), **(replaced or {})}
    return {s: list(dict.fromkeys(n for g in parts for n in have[g])) for s, parts in SETS.items()}


def make_models(names: list[str]) -> None:
    """The synthetic model of each of `names`, made where missing or out of date (`synth.ensure_model`);
    one line for each one made, none for those already there."""
    from . import synth  # numpy and gguf: only when asked

    for name in names:
        t0 = time.time_ns()
        made = synth.ensure_model(name, MODELS)
        if made.stat().st_mtime_ns >= t0:  # written by this call, not found current
            print(f"made the synthetic model {made.name} (the {name} fixture's tokenizer)", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m llgbridge.inputsets", description=__doc__.splitlines()[0])
    ap.add_argument("--groups", default="", help="GROUP=NAMES ..., as a shell splits it (make report INPUTS=...)")
    ap.add_argument("--make-models", action="store_true", help="make the MATRIX_VOCABS group's synthetic models")
    a = ap.parse_args(argv)
    try:
        replaced = parse(a.groups)
        if a.make_models:
            make_models({**groups(), **replaced}["MATRIX_VOCABS"])
            return 0
    except InputError as e:
        print(e, file=sys.stderr)
        return 2
    for name, inputs in input_sets(replaced).items():
        print(f"{name} ({INPUT_SETS[name]}): {' '.join(inputs) or '(none)'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
