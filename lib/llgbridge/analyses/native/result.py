"""The native analysis of one vocab (the `native` notebook's result): llama.cpp's own test on each
sampler and llguidance version, the differential per sampler, and bug C through each compiled
sampler (`special_literal_rows`)."""

from __future__ import annotations

import json
import subprocess
from dataclasses import asdict, dataclass, field
from typing import Any, cast

import numpy as np

from ...errors import first_line
from . import NativePayload
from .builder import LLG_PINNED, PATCH_OF, SAMPLERS, bin_dir, built_versions, unavailable, venv_llguidance
from .causes import classified
from .logs import TestRun
from .trace import (
    Differential,
    Job,
    Trace,
    differential,
    harness,
    harness_samplers,
    harness_serve,
    jobs_for,
    port_traces,
    special_job,
    special_literal,
)


@dataclass
class NativeResult:
    """The native analysis of one vocab: the tests and the differential, per sampler."""

    vocab: str
    tok_eos: int  # llama.cpp's choice for llguidance: EOT, else EOS (common/llguidance.cpp:148-151)
    tests: list[TestRun]
    diffs: list[Differential]
    harness_errors: dict[str, str] = field(
        default_factory=dict
    )  # "SAMPLER" or "SAMPLER llguidance V" -> why the harness did not finish
    versions: list[str] = field(default_factory=list)  # the llguidance versions run, pinned (1.0.1) first
    special: list[dict[str, Any]] = field(
        default_factory=list
    )  # bug C through each compiled sampler (special_literal_rows)
    mask_errors: list[dict[str, Any]] = field(
        default_factory=list
    )  # bug D: llguidance errors mid-walk (mask_error_rows)

    def test(self, test: str, sampler: str, llg: str = "") -> TestRun | None:
        llg = llg or venv_llguidance()
        return next(
            (t for t in self.tests if t.test == test and t.sampler == sampler and t.llguidance in (llg, "")), None
        )

    def rows(self, samplers: tuple[str, ...] = SAMPLERS) -> list[dict[str, Any]]:
        """native.csv: one row per (vocab, sampler, llguidance), llama.cpp's pin first. The
        differential compares each with the port, which drives the venv's llguidance: on the
        venv's version a difference is the port's, on another it is the version's."""
        out = []
        for llg in self.versions or [venv_llguidance()]:
            ran = {x.sampler for x in self.diffs if x.llguidance == llg} | {
                t.sampler for t in self.tests if t.llguidance == llg
            }
            for s in (x for x in samplers if x in SAMPLERS or x in ran):
                pr, shipped = self.test("pr", s, llg), self.test("shipped", s, llg)
                d = next((x for x in self.diffs if x.sampler == s and x.llguidance == llg), None)
                key = s if llg == venv_llguidance() else f"{s} llguidance {llg}"
                out.append(
                    {
                        "vocab": self.vocab,
                        "sampler": s,
                        "llguidance": llg,
                        "tok_eos": self.tok_eos,
                        "pr_test_exit": pr.exit_code if pr else "",
                        "no_space_allowed": _blank(pr.space_allowed if pr else None),
                        "no_space_bad": _blank(pr.space_bad if pr else None),
                        "forced_allowed": _blank(pr.forced_allowed if pr else None),
                        "forced_bad": _blank(pr.forced_bad if pr else None),
                        "string_tests": pr.string_tests if pr else "",
                        "pr_test_failure": pr.failure if pr else "",
                        "pr_test_llg_error": pr.llg_error if pr else "",
                        "pr_test_cause": pr.cause if pr else "",
                        "pr_test_rule": pr.rule if pr else "",
                        "shipped_test_exit": shipped.exit_code if shipped else "",
                        "shipped_test_failure": shipped.failure if shipped else "",
                        "shipped_test_llg_error": shipped.llg_error if shipped else "",
                        "shipped_test_cause": shipped.cause if shipped else "",
                        "shipped_test_rule": shipped.rule if shipped else "",
                        "greedy": "" if d is None or d.greedy_cpp is None else d.greedy_cpp,
                        "diff_jobs": d.jobs if d else "",
                        "diff_cells": d.cells if d else "",
                        "diff_differ": len(d.differences) if d else "",
                        "harness_error": self.harness_errors.get(key, ""),
                    }
                )
        return out

    def difference_rows(self, vocab: Any = None) -> list[dict[str, Any]]:
        """Every difference, with the real bytes of its example tokens when `vocab` is given."""

        def pieces(ids: tuple[int, ...]) -> str:
            if vocab is None:
                return ""
            return json.dumps(
                [vocab.token_to_piece(t).decode("utf-8", "backslashreplace") for t in ids], ensure_ascii=False
            )

        return [
            {
                **asdict(x),
                "llguidance": d.llguidance,
                "only_cpp": " ".join(map(str, x.only_cpp)),
                "only_port": " ".join(map(str, x.only_port)),
                "only_cpp_pieces": pieces(x.only_cpp),
                "only_port_pieces": pieces(x.only_port),
            }
            for d in self.diffs
            for x in d.differences
        ]

    def payload(self, vocab: Any = None) -> NativePayload:
        out = {
            "rows": self.rows(),
            # the candidate patches' rows, the same columns: their PR test (pinned llguidance) and differential
            "candidates": self.rows(tuple(PATCH_OF)),
            "differences": self.difference_rows(vocab),
            "tests": [asdict(t) for t in self.tests],
            "special": self.special,
            "mask_errors": self.mask_errors,
        }
        return cast(NativePayload, out)


def _blank(x: int | None) -> int | str:
    return "" if x is None else x


def analyse(
    vocab: Any, literal: str, leak_grammar: str, walks: int = 2, seed: int = 0, make_bridge: Any = None
) -> NativeResult:
    """Both test binaries against both samplers, and the differential, for one loaded `Vocab`,
    every compiled program given the vocab's key overrides (`Vocab.overrides`) as its load.
    Each test that exits non-zero has its cause named (`causes.classify`).

    `make_bridge(vocab, name)` makes a bridge (default `bridges.make_bridge`; a notebook passes its cache).
    """
    from ... import bridges  # the native package is imported by the runner and the build, which load no bridge

    make_bridge = make_bridge or bridges.make_bridge
    why = unavailable()
    if why:
        raise RuntimeError(why)
    versions = built_versions() or [venv_llguidance()]
    kv = vocab.overrides
    tok_eos = bridges.llama_tok_eos(vocab)
    truth = make_bridge(vocab, "truth")
    jobs = jobs_for(truth, literal, leak_grammar, walks, seed)
    pin = LLG_PINNED if LLG_PINNED in versions else versions[0]
    cands = [c for c in PATCH_OF if (bin_dir(pin) / f"test-pr-{c}").exists()]
    diffs, errors, mask_errors = [], {}, []
    tested: dict[tuple[str, str, str], TestRun] = {}  # (llguidance, test, sampler) -> llama.cpp's test
    ran: dict[tuple[str, str], dict[str, Trace]] = {}  # (llguidance, sampler) -> its harness's traces
    ports: dict[str, dict[str, Trace]] = {}  # sampler -> the port's walks, the same on every version
    for v in versions:
        # each candidate's port (bridges.NoSpecial, FailClosed) against its compiled sampler, as the PR's;
        # one harness process per version serves every sampler, and llama.cpp's tests against each
        samplers = [*SAMPLERS, *(c for c in PATCH_OF if c in harness_samplers(v))]
        tests_of: dict[str, tuple[str, ...]] = {s: ("shipped", "pr") for s in SAMPLERS} | (
            {c: ("pr",) for c in cands} if v == pin else {}
        )
        served = harness_serve({s: jobs for s in samplers}, vocab.path, tests_of, llg=v, overrides=kv)
        tested |= {(v, t, s): run for (t, s), run in served.tests.items()}
        for s, traces in served.traces.items():
            key = s if v == venv_llguidance() else f"{s} llguidance {v}"
            if isinstance(traces, Exception):
                errors[key] = first_line(str(traces))
                continue
            ran[v, s] = traces
            bridge = make_bridge(vocab, s)
            if s not in ports:
                ports[s] = port_traces(bridge, jobs)
            diffs.append(differential(bridge, jobs, traces, v, ports[s]))
            mask_errors += mask_error_rows(vocab, s, v, jobs, traces, diffs[-1])
    # in the order the tests always came: per version, the shipped test then the PR's, then the candidates'
    order = [(v, t, s) for v in versions for t in ("shipped", "pr") for s in SAMPLERS] + [(pin, "pr", c) for c in cands]
    tests = [tested[k] for k in order]
    tests = [classified(t, vocab, tok_eos) for t in tests]
    # bug C's walk is one of the differential's jobs: its trace from the run above, where that ran
    special_job_ = special_job(vocab)
    walked = {
        s: t["special"]
        for (v, s), t in ran.items()
        if v == pin and special_job_ is not None and special_job_ in jobs and "special" in t
    }
    special = special_literal_rows(vocab, [*SAMPLERS, *cands], pin, walked)
    return NativeResult(vocab.name, tok_eos, tests, diffs, errors, versions, special, mask_errors)


def mask_error_rows(
    vocab: Any, sampler: str, llg: str, jobs: list[Job], traces: dict[str, Trace], d: Differential
) -> list[dict[str, Any]]:
    """Bug D through a compiled sampler: each job whose mask failed mid-walk, as `soundness.MaskError`
    rows (the grammar is the job's id) plus `llguidance`; what the sampler did next is measured, the
    count it allowed at the failed step. The item count comes from the port's error at the same
    step (the sampler logs only the first line), so it is given on the venv's llguidance only."""
    from ...soundness import mask_error  # likewise

    out = []
    for job in jobs:
        t = traces[job.id]
        if not t.error or t.error_step is None or t.error_step >= len(t.allowed):
            continue
        # the port drives the venv's llguidance: its item count stands only for that version
        port = d.port_errors.get(job.id, "") if llg == venv_llguidance() else ""
        e = mask_error(
            None,
            vocab.name,
            job.id,
            "",
            t.error_step,
            "mask",
            port if first_line(port) == first_line(t.error) else t.error,
        )
        allowed = t.allowed[t.error_step]
        n = len(allowed)
        then = (
            "grammar dropped"
            if n == vocab.n_tokens
            else "end of generation only"
            if np.isin(allowed, vocab.eog_tokens).all()
            else f"{n} tokens allowed"
        )
        out.append({**asdict(e), "bridge": sampler, "then": then, "then_allowed": n, "llguidance": llg})
    return out


def special_literal_rows(
    vocab: Any, samplers: list[str], llg: str, walked: dict[str, Trace] | None = None
) -> list[dict[str, Any]]:
    """Bug C through the compiled samplers: a literal spelling the vocab's end-of-turn token as
    text (`say TEXT now`), followed step by step; where the walk stops, what each sampler allows
    there, by id and real bytes. A sampler that parses the text into the control token allows
    only that token (a decoder ends the turn), one that spells it out allows the text's first piece.

    `walked`: sampler -> its trace of this walk (`special_job`) from a harness run on `llg` that
    had it among its jobs (`analyse`'s differential); the harness runs it for the others."""
    job = special_job(vocab)
    if job is None:
        return []
    literal = special_literal(vocab)
    out = []
    for s in samplers:
        try:
            t = (walked or {}).get(s) or harness(s, vocab.path, [job], llg=llg, overrides=vocab.overrides)["special"]
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            out.append(
                {"vocab": vocab.name, "sampler": s, "llguidance": llg, "literal": literal, "error": first_line(str(e))}
            )
            continue
        consumed = [x for x in t.tokens if x >= 0]
        last = t.allowed[-1] if t.allowed else np.array([], dtype=np.int64)
        spelled = vocab.real_bytes(consumed)
        out.append(
            {
                "vocab": vocab.name,
                "sampler": s,
                "llguidance": llg,
                "literal": literal,
                "steps": len(t.allowed),
                "spelled": spelled.decode("utf-8", "backslashreplace"),
                "complete": spelled == literal.encode(),
                "stop_allowed": " ".join(str(int(x)) for x in last[:8]),
                "n_stop_allowed": int(len(last)),
                "stop_allowed_pieces": json.dumps(
                    [vocab.token_to_piece(int(x), special=True).decode("utf-8", "backslashreplace") for x in last[:8]],
                    ensure_ascii=False,
                ),
                "error": first_line(t.error),
            }
        )
    return out
