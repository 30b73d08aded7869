"""The verdict: the recommendation and the rules it follows from, where the suite and the guide
disagree, what happened per bug, and one row per input; first on the page and in the PR comment."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .. import guide
from ..analyses import BY_NAME
from ..analyses.native.compute import version_key
from ..analyses.native.section import abort_cause, pr_test_cell
from ..analyses.server.llama_server import LLG_PINNED
from ..analyses.server.section import SERVER_CONTROLS
from ..candidates import BY_BUG
from ..catalogue import REAL_MODELS, overridden
from ..inputsets import input_sets
from ..results import port_llguidance
from .data import PageData, takes_page_data
from .prose import blocks
from .table import Cell, Table, after_fix, cell_value, guide_order, pinned_rows, result_rows, shows, values

# the two ctest entries the PR's test runs under (tests/CMakeLists.txt: the one it has, the one it adds)
CTEST_VOCABS = ("llama-bpe", "llama-spm")
CANDIDATE_PATCHES = {bug: c.patch for bug, c in BY_BUG.items()}
# upstream reports of the same class as a finding, with their state when read (2026-12-02; none
# reports bugs A-D as such). #24144 was closed by #24154, a null check on the sampler that
# llama_sampler_init_llg passes: it returns a sampler even when it has no matcher
UPSTREAM = {
    "ignored": [
        ("19051", "llama-server fails open when JSON schema grammar parsing fails", "open"),
        (
            "24144",
            "invalid GBNF grammar is silently ignored instead of returning HTTP 400",
            "closed by #24154 for GBNF; `llama_sampler_init_llg` returns a sampler even without a matcher, which that "
            "check lets through",
        ),
    ],
    "B": [("8584", "Tokenization adds a space to the first non-special token", "closed")],
}
ISSUES_URL = "https://github.com/ggml-org/llama.cpp/issues/"


@dataclass
class Verdict:
    sentences: list[str]
    df: pd.DataFrame  # one row per input, its cells coloured
    reproduced: tuple[int, int]  # (guide figures matched, guide figures compared)
    recommendation: dict[str, Any] = field(default_factory=dict)  # the call, and the rules it follows from
    disagreements: list[str] = field(default_factory=list)  # where the suite finds the guide wrong (Markdown)
    facts: dict[str, Any] = field(default_factory=dict)  # what the sentences say, for the PR comment

    def table(self, links: dict[str, str] | None = None) -> Table:
        return Table(self.df, links=links)

    @property
    def values(self) -> pd.DataFrame:
        """The rows as values, without their colours."""
        return values(self.df)


def guide_figures(res: PageData) -> list[tuple[str, bool]]:
    """Every figure of the guide this suite recomputes, and whether ours equals it."""
    out: list[tuple[str, bool]] = []
    census, _ = res.load("census")
    for r in census:
        v, s = r["vocab"], r["summary"]
        if v in guide.CENSUS:
            out.append((f"4.3 {v}", (s["differing"], s["lost_leading_space"], s["n_tokens"]) == guide.CENSUS[v]))
        if v in guide.EXAMPLES:
            tok, piece, detok = guide.EXAMPLES[v]
            d = next((d for d in r["diffs"] if d["token"] == tok), None)
            out.append((f"4.3 example {v}", bool(d and (d["piece"], d["detok"]) == (piece.decode(), detok.decode()))))
    leak, _ = res.load("leak")
    for r in leak:
        rows = {x["bridge"]: x for x in r["rows"]}
        if r["vocab"] in guide.LEAK:
            got = tuple(rows.get(b, {}).get("allowed_with_space") for b in ("upstream", "fixed"))
            out.append((f"4.4 {r['vocab']}", got == guide.LEAK[r["vocab"]]))
    forced, _ = res.load("forced")
    for r in forced:
        rows = {x["bridge"]: x for x in r["rows"]}
        if r["vocab"] in guide.FORCED:
            for b, want_pieces in zip(("upstream", "fixed"), guide.FORCED[r["vocab"]]):
                pieces = sorted(json.loads(rows[b]["pieces"])) if b in rows and rows[b].get("pieces") else None
                out.append((f"7.2 {r['vocab']} {b}", pieces == sorted(p.decode() for p in want_pieces)))
    native, _ = res.load("native")
    for r in native:
        rows = {x["sampler"]: x for x in pinned_rows(r)}
        if r["vocab"] in guide.UNIT:
            for s, want in zip(("upstream", "fixed"), guide.UNIT[r["vocab"]]):
                out.append(
                    (
                        f"7.1 {r['vocab']} {s}",
                        (rows.get(s, {}).get("pr_test_exit"), rows.get(s, {}).get("no_space_bad")) == tuple(want),
                    )
                )
    return out


def time_cost(res: PageData) -> dict[str, Any] | None:
    """The fix's time cost, from the committed `make bench` snapshot: the mask's µs per generated
    token, upstream / fixed per vocab, as bench.csv records them (3 significant digits, medians of
    its runs), and the largest ratio. None without a snapshot."""
    bench = res.bench
    if bench.empty:
        return None
    m = bench[(bench.benchmark == "mask_per_token") & bench.variant.isin(["upstream", "fixed"])]
    if m.empty:
        return None
    us = {(r.vocab, r.variant): 1e6 * float(r.seconds) for r in m.itertuples()}
    vocabs = [v for v in dict.fromkeys(m.vocab) if (v, "upstream") in us and (v, "fixed") in us]
    ratio = {v: us[(v, "fixed")] / us[(v, "upstream")] for v in vocabs}
    worst = max(vocabs, key=lambda v: ratio[v], default="")
    md = res.bench_csv.with_suffix(".md")
    text = md.read_text(encoding="utf-8") if md.exists() else ""
    machine = next(
        (line.removeprefix("Machine: ").rstrip(".") for line in text.splitlines() if line.startswith("Machine: ")), ""
    )
    return {
        "runs": bench_runs(text),
        "cells": [f"{v} {us[(v, 'upstream')]:.3g} / {us[(v, 'fixed')]:.3g}" for v in vocabs],
        "worst": f"{ratio[worst]:.2f}" if worst else "1.00",
        "worst_vocab": worst,
        "best": f"{min(ratio.values()):.2f}" if ratio else "1.00",
        "link": res.link(md, "bench.md"),
        "machine": machine,
    }


def bench_runs(md: str) -> str:
    """How many runs bench.md says each mask-per-token figure is the median of, from its own words
    ("" where it does not say)."""
    line = next((x for x in md.splitlines() if "mask per generated token" in x), "")
    m = re.search(r"medians? of (\d+) runs", line, re.I)
    return m[1] if m else ""


def _server_frame(res: PageData) -> pd.DataFrame:
    """The server's rows on llguidance as llama.cpp pins it, the matrix's cases without the controls."""
    ok, _ = res.load("server")
    served = pd.DataFrame([row for r in ok for row in r["rows"]]) if ok else pd.DataFrame()
    if served.empty:
        return served
    pin = LLG_PINNED if (served.llguidance == LLG_PINNED).any() else sorted(served.llguidance.unique())[0]
    return served[served.llguidance == pin].rename(columns={"sampler": "bridge"})


def recommend(
    broken: list[str],
    worse: list[str],
    ctest: dict[str, tuple[Any, Any]],
    follow_ups: list[dict[str, str]],
    have_ctest_vocabs: bool = True,
    missing: str = "",
) -> dict[str, Any]:
    """The call, by rules a reader can check: the fix must repair every vocab bugs A and B hit,
    make none worse, and pass the PR's own ctest entries; then approve, each finding beyond the PR
    that is the same before and after it becoming a named follow-up. Otherwise ask for changes,
    naming the rule that failed."""
    # without the compiled test's results the third rule is not measured: no call is made on it
    passes = (all(a == 0 for _, a in ctest.values()) and len(ctest) == len(CTEST_VOCABS)) if ctest else None
    rules: list[dict[str, Any]] = [
        {"rule": "the fix repairs every vocab bug A or bug B hits", "holds": not broken, "why": ", ".join(broken)},
        {
            "rule": "it makes no vocab worse (token table, forced mask, the PR's test, the server's cases)",
            "holds": not worse,
            "why": ", ".join(worse),
        },
        {
            "rule": "the PR's two ctest entries pass with it",
            "holds": passes,
            "why": "; ".join(f"{v}: exit {b} without, {a} with" for v, (b, a) in ctest.items()),
        },
    ]
    if missing:
        # a rule about "every vocab" holds only of the set it was measured on: a narrowed set, or an
        # analysis without a result on some input, measures none of them
        rules = [{**r, "holds": None, "why": missing} for r in rules]
    ok = all(r["holds"] for r in rules)
    call = (
        ("approve" if not follow_ups else f"approve, with {len(follow_ups)} follow-up{'s' * (len(follow_ups) != 1)}")
        if ok
        else "request changes"
        if any(r["holds"] is False for r in rules)
        else "none yet: a rule is not measured"
    )
    # where the third rule has no measure, say why: this report's inputs lack the two ctest vocabs (a
    # what-if on another vocab), or the compiled test has no result for them (its build or run failed)
    where = "has among its inputs" if have_ctest_vocabs else "does not have among its inputs: the main report has"
    unmeasured = (
        f" ({missing})"
        if missing
        else ""
        if passes is not None
        else f" (the native analysis has no result on {' and '.join(CTEST_VOCABS)}, which this report {where})"
    )
    return {"call": call, "rules": rules, "follow_ups": follow_ups if ok else [], "ok": ok, "unmeasured": unmeasured}


@dataclass
class Loaded:
    """What the verdict reads, as frames and maps: the census summaries per vocab; the leak and
    forced rows; the probe per vocab; the compiled samplers' rows per (vocab, sampler) on the
    pinned llguidance; the port's matrix; and the server's rows, with and without the controls."""

    info: dict[str, dict[str, Any]]
    leak: pd.DataFrame
    forced: pd.DataFrame
    probes: dict[str, dict[str, Any]]
    native_ok: list[dict[str, Any]]
    native: dict[tuple[str, str], dict[str, Any]]
    matrix: pd.DataFrame
    served_all: pd.DataFrame
    served: pd.DataFrame


def verdict_frames(res: PageData, census: list[dict[str, Any]]) -> Loaded:
    frames = {}
    for name in ("leak", "forced"):
        ok, _ = res.load(name)
        frames[name] = result_rows(ok) if ok else pd.DataFrame(columns=["vocab", "bridge"])
    probe_ok, _ = res.load("probe")
    native_ok, _ = res.load("native")
    matrix_ok, _ = res.load("matrix")
    # end to end: from the real llama-server where it ran, else from the port's matrix
    served_all = _server_frame(res)
    return Loaded(
        info={r["vocab"]: r["summary"] for r in census},
        leak=frames["leak"],
        forced=frames["forced"],
        probes={r["vocab"]: r["probe"] for r in probe_ok},
        native_ok=native_ok,
        native={(r["vocab"], row["sampler"]): row for r in native_ok for row in pinned_rows(r)},
        matrix=pd.DataFrame([row for r in matrix_ok for row in r["rows"]]) if matrix_ok else pd.DataFrame(),
        served_all=served_all,
        served=served_all[~served_all.case.isin(SERVER_CONTROLS)] if not served_all.empty else served_all,
    )


@dataclass
class Measured:
    """One input's measures without and with the fix, as the verdict's row and tallies read them."""

    up_leak: Any
    fx_leak: Any
    up_np: Any
    fx_np: Any
    up_ok: Any
    fx_ok: Any
    up_err: Any
    probe: dict[str, Any]
    n_up: dict[str, Any]
    n_fx: dict[str, Any]
    differing: Any  # the census's tokens with wrong bytes

    @classmethod
    def of(cls, d: Loaded, v: str) -> Measured:
        leak, forced = d.leak, d.forced
        return cls(
            cell_value(leak, v, "upstream", "allowed_illegal"),
            cell_value(leak, v, "fixed", "allowed_illegal"),
            cell_value(forced, v, "upstream", "not_prefix"),
            cell_value(forced, v, "fixed", "not_prefix"),
            cell_value(forced, v, "upstream", "output_ok"),
            cell_value(forced, v, "fixed", "output_ok"),
            cell_value(forced, v, "upstream", "error") or "",
            d.probes.get(v, {}),
            d.native.get((v, "upstream"), {}),
            d.native.get((v, "fixed"), {}),
            d.info[v]["differing"],
        )

    @property
    def bug_a(self) -> bool:
        return bool(self.differing) or bool(self.up_leak)

    @property
    def bug_b(self) -> bool:
        # the matcher dying along the literal is bug B's effect even where every token allowed was a
        # prefix and the output came out right (its row says "grammar dropped: yes")
        return bool(self.up_np) or (self.up_ok is not None and not bool(self.up_ok)) or bool(self.up_err)

    @property
    def fix_ok(self) -> bool:
        return not self.fx_leak and not self.fx_np and (self.fx_ok is None or bool(self.fx_ok))

    @property
    def greedy(self) -> bool:
        return bool(self.probe.get("greedy"))

    @property
    def worse(self) -> bool:
        """Worse with the fix than without, on any measure of the port and the compiled test."""
        return (
            int(self.fx_leak or 0) > int(self.up_leak or 0)
            or (bool(self.fx_np) and not self.up_np)
            or (self.n_fx.get("pr_test_exit") not in (None, "", 0) and self.n_up.get("pr_test_exit") == 0)
        )


def end_to_end(d: Loaded, v: str) -> tuple[Cell | str, bool]:
    """The end-to-end cell (cases passed without → with, from the server where it ran, else the
    port's matrix), and whether the server fails a case with the fix that it passed without."""
    for source, frame in (("llama-server", d.served), ("port", d.matrix)):
        m = frame[frame.vocab == v] if not frame.empty else frame
        if not m.empty:
            kind = "synthetic" if bool(m.synthetic.iloc[0]) else "real model"
            e2e = (
                " → ".join(
                    f"{int((m[m.bridge == br].outcome == 'pass').sum())}/{len(m[m.bridge == br])}"
                    for br in ("upstream", "fixed")
                )
                + f" ({'server' if source == 'llama-server' else 'port'}, {kind})"
            )
            worse = False
            if source == "llama-server":
                fails_fx = set(m[(m.bridge == "fixed") & (m.outcome != "pass")].case)
                worse = bool(fails_fx - set(m[(m.bridge == "upstream") & (m.outcome != "pass")].case))
            return e2e, worse
    return Cell("not run", ""), False


def input_row(v: str, s: dict[str, Any], m: Measured, e2e: Cell | str) -> dict[str, Any]:
    """The verdict's row of one input, its cells coloured."""
    up_leak, fx_leak, up_np, fx_np, p = m.up_leak, m.fx_leak, m.up_np, m.fx_np, m.probe
    fx_forced = "" if fx_np is None else ("ok" if not fx_np and m.fx_ok else "FAILS")
    return {
        "input": v,
        "type": s.get("vocab_type", "")
        + (" · stand-in" if v in overridden() else " · real model" if v in REAL_MODELS else ""),
        "bug A: tokens with wrong bytes": Cell(s["differing"], shows(s["differing"])),
        "bug A: illegal tokens admitted": Cell("not run" if up_leak is None else up_leak, shows(up_leak)),
        "bug B: llama_tokenize exact": Cell(
            "not run" if not p else ("yes" if p.get("tokenize_exact") else "no"),
            shows(p and not p.get("tokenize_exact")),
        ),
        "bug B: forced mask": Cell(
            "not run"
            if up_np is None
            else ("ok" if not up_np else f"{up_np} token{'s' if up_np != 1 else ''} not a prefix"),
            shows(up_np),
        ),
        "bug B: grammar dropped": Cell("yes" if m.up_err else "no", shows(m.up_err)),
        "with the fix: illegal admitted": Cell("not run", "")
        if fx_leak is None
        else Cell(fx_leak, after_fix(up_leak, fx_leak)),
        "with the fix: forced mask": Cell("not run", "")
        if fx_np is None
        else Cell(fx_forced, after_fix(m.bug_b, fx_forced == "FAILS")),
        "with the fix: tokenizer": Cell("greedy" if m.greedy else "tokenize_fn", "cost" if m.greedy else "ok"),
        "the PR's test: exit without → with": pr_test_cell(m.n_up, m.n_fx),
        "end to end: cases passed without → with": e2e,
    }


@dataclass
class Tally:
    """The inputs' rows, and which inputs each bug hits, the fix repairs, leaves broken, costs the
    greedy fallback or makes worse, and where the PR's test still aborts after it, and why."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    hit_a: list[str] = field(default_factory=list)
    hit_b: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)
    costs: list[str] = field(default_factory=list)
    worse: list[str] = field(default_factory=list)
    aborts: list[dict[str, Any]] = field(default_factory=list)


def tally(d: Loaded) -> Tally:
    t = Tally()
    for v in guide_order(list(d.info)):
        s, m = d.info[v], Measured.of(d, v)
        a, b = m.bug_a, m.bug_b
        (t.hit_a if a else []).append(v)
        (t.hit_b if b else []).append(v)
        if a or b:
            (t.repaired if m.fix_ok else t.broken).append(v)
        if m.greedy:
            t.costs.append(v)
        e2e, server_worse = end_to_end(d, v)
        if m.worse or server_worse:
            t.worse.append(v)
        short, why, same = abort_cause(m.n_up, m.n_fx)
        if short:
            t.aborts.append({"vocab": v, "why": why, "same": same, "short": short})
        t.rows.append(input_row(v, s, m, e2e))
    return t


def port_agreement(native_ok: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The port against the compiled sampler, per llguidance the compiled code links: steps that
    agree, and where some differ, why (from the compiled side's own words on those steps)."""
    if not native_ok:
        return None
    rows = [row for r in native_ok for row in r["rows"]]
    port_llg = port_llguidance(native_ok)  # as the results record it (issue 48, break 2)
    versions = sorted({str(row.get("llguidance", port_llg)) for row in rows}, key=version_key)
    each = []
    for v in versions:
        mine = [row for row in rows if str(row.get("llguidance", port_llg)) == v]
        cells = sum(int(row.get("diff_cells") or 0) for row in mine)
        differ = sum(int(row.get("diff_differ") or 0) for row in mine)
        samplers = {row.get("sampler") for row in mine}
        diffs = [
            x
            for r in native_ok
            for x in r.get("differences", [])
            if str(x.get("llguidance", port_llg)) == v and x.get("sampler") in samplers
        ]
        each.append(
            {"llguidance": v, "agree": cells - differ, "cells": cells, "differ": differ, "cause": _why_differ(diffs)}
        )
    return {"versions": each, "port": port_llg, "vocabs": len(native_ok)}


# llguidance 1.0.1's token-mask bitset (SimpleVob) indexes word tok >> 5: tok_eos = -1 as u32 gives
# 0xFFFFFFFF >> 5 = 134217727, past the mask's ceil(n_vocab / 32) words
_EOS_PANIC = re.compile(r"panic: index out of bounds: the len is (\d+) but the index is 134217727")


def _why_differ(diffs: list[dict[str, Any]]) -> str:
    """Why the compiled code and the port differ on these steps, one clause per cause."""
    causes: dict[str, set[str]] = {}
    for x in diffs:
        m = _EOS_PANIC.search(str(x.get("cpp", "")))
        said = (
            f"the compiled code panics indexing its {m[1]}-word token mask at 134217727 = 0xFFFFFFFF >> 5, "
            "tok_eos = -1: the vocab has no EOT and no EOS"
            if m
            else f"{x.get('what', '')}: {str(x.get('cpp', ''))[:80]}"
        )
        causes.setdefault(said, set()).add(str(x.get("vocab")))
    return "; ".join(f"{said} ({', '.join(sorted(v))})" for said, v in sorted(causes.items()))


def bug_c_facts(d: Loaded) -> dict[str, Any] | None:
    """Bug C from the compiled samplers: where a special token's literal cannot be spelled with
    the fix, on how many vocabs it was walked, repaired by the candidate, the same without the PR."""
    special = [row for r in d.native_ok for row in r.get("special", [])]
    walked = sorted({x["vocab"] for x in special if x.get("sampler") == "fixed"})
    c_hit = sorted(
        {x["vocab"] for x in special if x.get("sampler") == "fixed" and x.get("steps") and not x.get("complete")}
    )
    if not c_hit:
        return None
    c_fix = sorted({x["vocab"] for x in special if x.get("sampler") == "nospecial" and x.get("complete")} & set(c_hit))
    spelled = {(x["vocab"], x["sampler"]): (x.get("complete"), x.get("spelled"), x.get("error")) for x in special}
    c_same = [v for v in c_hit if spelled.get((v, "upstream")) == spelled.get((v, "fixed"))]
    ex = next(
        x
        for x in special
        if x.get("sampler") == "fixed" and x["vocab"] == ("llama-bpe" if "llama-bpe" in c_hit else c_hit[0])
    )
    return {
        "hit": c_hit,
        "vocab": ex["vocab"],
        "literal": ex["literal"],
        "spelled": ex["spelled"],
        "walked": len(walked),
        "allowed": ex["stop_allowed_pieces"],
        "repaired": len(c_fix),
        "same": len(c_same),
        "without": sorted(set(d.info) - set(walked)),
        "patch": CANDIDATE_PATCHES["C"],
    }


def bug_d_facts(aborts: list[dict[str, Any]]) -> dict[str, Any] | None:
    d_rows = [x for x in aborts if x["short"].startswith("bug D")]
    if not d_rows:
        return None
    return {
        "hit": [x["vocab"] for x in d_rows],
        "same": all(x["same"] for x in d_rows),
        "patch": CANDIDATE_PATCHES["D"],
    }


def server_facts(res: PageData, served: pd.DataFrame) -> dict[str, Any] | None:
    """The server's cases without the fix that fail, and silently; with it, its violations; `make
    bench`'s load test on the models served here; how many real models it served."""
    if served.empty:
        return None
    loads = [x for x in res.server_load.to_dict("records") if x["model"] in set(served.model)]
    up = served[served.bridge == "upstream"]
    silent = up[(up.outcome != "pass") & (up.http_status == 200) & ~up.error_field.astype(bool)]
    return {
        "silent": len(silent),
        "failing": int((up.outcome != "pass").sum()),
        "models": served.model.nunique(),
        "fixed_bad": len(served[(served.bridge == "fixed") & (served.outcome == "violation")]),
        **load_verdict(loads),
        "real": int(served[~served.synthetic.astype(bool)].vocab.nunique()) if "synthetic" in served else 0,
    }


def real_weight_rows(served: pd.DataFrame, overridden_here: dict[str, Any]) -> list[dict[str, Any]]:
    """The guide's real-weight rows (TinyLlama, Mistral, Hermes: SentencePiece with the space
    prefix), on a trained model loaded with llama.cpp's own override: its three server cases
    without and with the fix."""
    out: list[dict[str, Any]] = []
    if served.empty:
        return out
    for v in overridden_here:
        g = served[(served.vocab == v) & served.case.isin(guide.SERVER_CASES)]
        if not g.empty:
            silent = (
                (g.bridge == "upstream") & (g.outcome != "pass") & (g.http_status == 200) & ~g.error_field.astype(bool)
            )
            out.append(
                {
                    "input": v,
                    "up": int((g[g.bridge == "upstream"].outcome == "pass").sum()),
                    "fx": int((g[g.bridge == "fixed"].outcome == "pass").sum()),
                    "n": len(guide.SERVER_CASES),
                    "silent": int(silent.sum()),
                }
            )
    return out


def ignored_facts(d: Loaded) -> dict[str, Any] | None:
    """The schema llguidance cannot compile, sent to the server: how often it was ignored."""
    if d.served.empty:
        return None
    rej = d.served_all[d.served_all.case == "rejected_schema"]
    if rej.empty:
        return None
    ign = rej[rej.outcome == "ignored"]
    return {
        "n": len(ign),
        "of": len(rej),
        "both": set(ign.bridge) >= {"upstream", "fixed"},
        "issues": UPSTREAM["ignored"],
    }


def disagreements(figs: list[tuple[str, bool]]) -> list[str]:
    """The guide's figures this suite recomputes and gets otherwise (Markdown); what it finds of the
    guide's words is the claims' (`claims.guide_notes`), said once for the page and the comment."""
    missed = [name for name, ok in figs if not ok]
    return [f"**Figures that differ:** {', '.join(missed)}."] if missed else []


def follow_ups(
    bug_c: dict[str, Any] | None, bug_d: dict[str, Any] | None, ignored: dict[str, Any] | None
) -> list[dict[str, str]]:
    """Each finding beyond the PR that is the same before and after it: a follow-up."""
    out = []
    if bug_c and bug_c["same"] == len(bug_c["hit"]):
        out.append(
            # named, not counted: the counts are the findings' own sentences, stand-ins apart
            {"what": "bug C", "patch": CANDIDATE_PATCHES["C"]}
        )
    if bug_d and bug_d["same"]:
        out.append({"what": "bug D", "patch": CANDIDATE_PATCHES["D"]})
    if ignored and ignored["both"]:
        out.append(
            {
                "what": "the ignored schema",
                "patch": "",
                "issues": ", ".join(f"[#{n}]({ISSUES_URL}{n})" for n, _, _ in ignored["issues"]),
            }
        )
    return out


def verdict_facts(res: PageData, d: Loaded, t: Tally, figs: list[tuple[str, bool]]) -> dict[str, Any]:
    """What the sentences say, for the PR comment: the tallies, and the findings beyond the PR."""
    native, info = d.native, d.info
    ctest = {
        v: (native[(v, "upstream")].get("pr_test_exit"), native[(v, "fixed")].get("pr_test_exit"))
        for v in CTEST_VOCABS
        if (v, "upstream") in native and (v, "fixed") in native
    }
    passing = sorted(
        (v for v in info if (native.get((v, "fixed")) or {}).get("pr_test_exit") == 0),
        key=guide_order(list(info)).index,
    )
    return {
        "n": len(info),
        "hit_a": t.hit_a,
        "hit_b": t.hit_b,
        "beyond": [v for v in t.hit_b if info[v].get("vocab_type") not in {"SPM"}],
        "repaired": t.repaired,
        "broken": t.broken,
        "costs": t.costs,
        "time": time_cost(res),
        "matched": sum(ok for _, ok in figs),
        "figures": len(figs),
        # which of the guide's figures, by its section ("4.3 llama-spm" counts for 4.3)
        "figure_sections": dict(sorted(Counter(label.split()[0] for label, _ in figs).items())),
        "port": port_agreement(d.native_ok),
        "aborts": t.aborts,
        "passing": passing,
        "ctest": ctest,
        "bug_c": bug_c_facts(d),
        "bug_d": bug_d_facts(t.aborts),
        "server": server_facts(res, d.served),
        "ignored": ignored_facts(d),
        "census": info,
        "upstream": UPSTREAM,
    }


def shipped_only(d: Loaded, facts: dict[str, Any], res: PageData) -> dict[str, Any]:
    """The facts as the verdict's counts say them: a stand-in (an input loaded with key overrides)
    never counts in "N of M"; its rows are said apart (`real_weight_rows`)."""
    stand = {v for v in overridden() if v in d.info}

    def only(xs: list[str]) -> list[str]:
        return [x for x in xs if x not in stand]

    out: dict[str, Any] = {
        k: only(facts[k]) for k in ("hit_a", "hit_b", "repaired", "broken", "costs", "passing", "beyond")
    }
    out["n"] = facts["n"] - len(stand)
    out["aborts"] = [a for a in facts["aborts"] if a["vocab"] not in stand]
    for k in ("bug_c", "bug_d"):
        out[k] = {**facts[k], "hit": only(facts[k]["hit"])} if facts[k] else None
        if out[k] is not None and not out[k]["hit"]:
            out[k] = None
    if out["bug_c"]:  # "of the N vocabs with an end-of-turn token": the stand-ins walked are not counted
        walked_apart = [v for v in stand if v not in facts["bug_c"]["without"]]
        out["bug_c"]["walked"] = facts["bug_c"]["walked"] - len(walked_apart)
    served = d.served[~d.served.vocab.isin(stand)] if not d.served.empty else d.served
    out["server"] = server_facts(res, served)
    return out


def verdict_sentences(d: Loaded, facts: dict[str, Any]) -> list[str]:
    """The verdict's sentences, from its facts (the fragment `verdict.md.j2`), the stand-ins apart."""
    overridden_here = {v: m for v, m in overridden().items() if v in d.info}
    facts = {**facts, **facts["shipped"]}
    aborts = facts["aborts"]
    keys = ("n", "hit_a", "hit_b", "broken", "repaired", "costs", "time", "matched", "figures", "port", "aborts")
    said = blocks(
        "verdict",
        **{k: facts[k] for k in keys},
        **{k: facts[k] for k in ("passing", "ctest", "bug_c", "bug_d", "server", "ignored")},
        beyond=[{"name": x, "type": d.info[x].get("vocab_type")} for x in facts["beyond"]],
        abort_groups=[
            {"why": w, "vocabs": [x["vocab"] for x in aborts if x["why"] == w]}
            for w in dict.fromkeys(x["why"] for x in aborts)
        ],
        n_native=len({v for v, _ in d.native} - set(overridden_here)),
        url=ISSUES_URL,
        issue_b=UPSTREAM["B"][0],
        overridden=[f"`{v}`" for v in overridden_here],
        real_weight=real_weight_rows(d.served, overridden_here),
        why={v: m.why for v, m in overridden_here.items()},
    )
    return [line.removeprefix("- ") for line in said["sentences"].splitlines() if line.strip()]


# the analyses the recommendation's rules read: each must have a result on every input of its set
RULE_ANALYSES = ("census", "leak", "forced", "native", "server")


def unmeasured_inputs(res: PageData, have: list[str]) -> str:
    """Why the rules are not measured on the main report's full input set ("" when they are): the
    inputs a narrowed set (`INPUTS=`) left out, or an analysis the rules read without a result on
    some input of its set."""
    # a what-if measures its own file: each rule's analysis must have a result on it (a server that
    # answered every request with HTTP 500 has none, and its rule is not measured, never ✓)
    sets = None if res.subject else input_sets()
    full = sets["every"] if sets else have
    left_out = [v for v in full if v not in have]
    if left_out:
        return f"measured on {len(have)} of the {len(full)} inputs; not on {', '.join(left_out)}"
    for name in RULE_ANALYSES:
        ok, _ = res.load(name)
        done = {r["vocab"] for r in ok}
        want = (sets[BY_NAME[name].runs_on] if name in BY_NAME else full) if sets else have
        if lacking := [v for v in want if v not in done]:
            return f"the {name} analysis has no result on {', '.join(lacking)}"
    return ""


@takes_page_data
def verdict(res: PageData) -> Verdict | None:
    """The reviewer's questions, answered from the results, and one row per input."""
    census, _ = res.load("census")
    if not census:
        return None
    d = verdict_frames(res, census)
    t = tally(d)
    figs = guide_figures(res)
    facts = verdict_facts(res, d, t, figs)
    # the one rule for every count of the verdict and the comment: stand-ins apart
    facts["shipped"] = shipped_only(d, facts, res)
    fups = follow_ups(facts["bug_c"], facts["bug_d"], facts["ignored"])
    rec = recommend(
        t.broken,
        sorted(set(t.worse), key=guide_order(list(d.info)).index),
        facts["ctest"],
        fups,
        all(v in d.info for v in CTEST_VOCABS),
        unmeasured_inputs(res, list(d.info)),
    )
    return Verdict(
        verdict_sentences(d, facts),
        pd.DataFrame(t.rows),
        (facts["matched"], len(figs)),
        rec,
        disagreements(figs),
        facts,
    )


def recommendation_md(rec: dict[str, Any]) -> str:
    """The rules behind the call, each with its mark, then the follow-ups (Markdown, one paragraph)."""
    if not rec:
        return ""
    mark = {True: "✓", False: "✗", None: "not measured:"}
    rules = "; ".join(
        f"{mark[r['holds']]} {r['rule']}" + (f" ({r['why']})" if r["why"] and r["holds"] is False else "")
        for r in rec["rules"]
    )
    tested = "On this suite's rebuild of the PR (not its branch: see what code was tested)"
    if rec["ok"]:
        said = f"{tested}: {rules}; all three hold, so approve once the same checks pass on the PR's own branch."
    elif any(r["holds"] is False for r in rec["rules"]):
        said = f"{tested}: {rules}; one fails, so ask for changes."
    else:
        said = f"{tested}: {rules}; no call is made on a rule without its measure{rec.get('unmeasured', '')}."
    if rec["follow_ups"]:
        said += (
            " Each finding beyond the PR that the PR does not make worse becomes a follow-up, not a reason to "
            "hold the PR: "
            + "; ".join(
                f"{f['what']}"
                + (f" (candidate `{f['patch'].split('-')[0]}` in patches/candidates/)" if f.get("patch") else "")
                + (f" (upstream {f['issues']})" if f.get("issues") else "")
                for f in rec["follow_ups"]
            )
            + "."
        )
    return said


def load_verdict(loads: list[dict[str, Any]]) -> dict[str, Any]:
    """What the verdict may say of `make bench`'s load test: the fixed build's violations under
    concurrent requests, only when every round counted the same (a figure that comes and goes
    between rounds is the server section's, with its spread, not a finding)."""
    fixed = [x for x in loads if x.get("sampler") == "fixed"]
    per_round: dict[int, int] = {}
    for x in fixed:
        for k, v in enumerate(str(x.get("violations_per_round") or x.get("violations") or 0).split()):
            per_round[k] = per_round.get(k, 0) + int(v)
    steady = len(set(per_round.values())) <= 1
    rounds = max((int(x.get("rounds") or 1) for x in fixed), default=0)
    return {"load_run": bool(fixed) and steady, "load_bad": per_round.get(0, 0) if steady else 0, "load_rounds": rounds}
