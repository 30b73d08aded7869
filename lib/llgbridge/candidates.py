"""The candidate patches beside the PR: one entry each, the one list every other place reads.

A candidate is a patch in `patches/candidates/`, applied on top of the PR in a tree of its own
(never replacing `fixed`), built as a sampler of its own (llama.cpp's test, the harness and
llama-server under the candidate's name) and ported as a bridge of the same name
(`bridges.bridge_class`), so the compiled code and the port are compared cell for cell by name.

Adding a candidate touches this file, its patch and its port class in `bridges.py`, and nothing
else: the native and server builds, the port's list, the colours (`palette` gives each the next
of its spare colours, in this order), the report's notes, the notebooks' default bridges and the
tests' swap map read the list here (tests/test_bridges.py checks it against `patches/candidates/`
and the port's classes).

Standard library only: the native build's helpers import it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Candidate:
    name: str  # the sampler's and the port's name: harness-NAME, test-pr-NAME, llama-server-NAME
    patch: str  # its file in patches/candidates/
    bug: str  # the finding it addresses (the report's follow-up names C and D; "A+B": another design for the PR's two)
    what: str  # one line: what it changes, as the report's tables say it


CANDIDATES: tuple[Candidate, ...] = (
    Candidate(
        "nospecial",
        "0004-llguidance-tokenize-fn-without-special-parsing.patch",
        "C",
        "tokenize_fn and the probes with parse_special = false, plus a fourth probe spelling the end-of-turn token",
    ),
    Candidate(
        "failclosed",
        "0005-llguidance-fail-closed-on-a-mask-error.patch",
        "D",
        "on a mask error, only end-of-generation tokens from then on, instead of dropping the grammar",
    ),
    Candidate(
        "ownbridge",
        "0007-llguidance-its-own-llama-cpp-bridge.patch",
        "A+B",
        "llguidance's own llama.cpp bridge in place of the PR's probe: the \\xff marker by token attribute, "
        "tokenize_fn without special parsing behind a sentinel byte; where no sentinel works (UGM, WPM) the PR's "
        "greedy fallback; the end token as the PR picks it (EOT, else EOS), a vocab with neither not refused",
    ),
)
NAMES: tuple[str, ...] = tuple(c.name for c in CANDIDATES)
BY_BUG: dict[str, Candidate] = {c.bug: c for c in CANDIDATES}
