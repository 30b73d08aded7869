"""The verdict: the recommendation and the rules it follows from, where the suite and the guide
disagree, what happened per bug, and one row per input; first on the page and in the PR comment."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import pandas as pd

from .. import guide
from ..candidates import BY_BUG
from ..catalogue import REAL_MODELS, overridden
from ..llama_server import LLG_PINNED
from .data import Results, takes_results
from .prose import blocks
from .review import probe_robustness, sentinel_cause, xff_moved
from .server import SERVER_CONTROLS, guide_server_rows
from .table import SAME, Cell, Table, after_fix, cell_value, guide_order, pinned_rows, result_rows, shows, values

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


def guide_figures(res: Results) -> list[tuple[str, bool]]:
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


def bad_tokens(row: dict[str, Any]) -> tuple[int, int]:
    """The PR test's two counts, apart: (allowed tokens with a space, allowed tokens not a prefix)."""
    return int(row.get("no_space_bad") or 0), int(row.get("forced_bad") or 0)


def abort_cause(up: dict[str, Any], fx: dict[str, Any]) -> tuple[str, str, bool]:
    """Why the PR's test still exits non-zero after the fix with no wrong token: (a few words for
    the cell, the sentence's words, whether it is the same before the PR). "" where it passes or a
    wrong token explains it. The sentence is the cause the native analysis named from what the test
    and the sampler did (`native.causes`, its rule in `pr_test_rule`), the one classifier of aborts;
    a result made before it named causes is read from its row the same way."""
    if fx.get("pr_test_exit") in (None, "", 0) or any(bad_tokens(fx)):
        return "", "", False
    rule = str(fx.get("pr_test_rule") or "")
    named = str(fx.get("pr_test_cause") or "")
    err = str(fx.get("pr_test_llg_error") or "")
    if rule == "llg_limit" or (not rule and "Too many items" in err):
        # before the PR the same test hits the same limit on both samplers (the shipped test's llg error)
        same = all("Too many items" in str(r.get("shipped_test_llg_error") or "") for r in (up, fx))
        return (
            "bug D: item limit",
            (named or "a mask over llguidance's step_max_items (50000) drops the grammar (bug D)")
            + (", as the test before the PR does on both samplers" if same else ""),
            same,
        )
    if rule == "no_eos" or (not rule and fx.get("tok_eos") == -1):
        return (
            "no end token",
            named
            or "the vocab has no end-of-turn or end-of-sequence token, and the test's "
            "`test_sampler_chain`, which the PR leaves as it was, indexes token -1",
            True,
        )
    fail = str(fx.get("pr_test_failure") or err)
    return (
        rule.replace("_", " ") if rule and rule != "unclassified" else "cause not classified",
        named or f"cause not classified: {fail[:80] or 'aborted'}",
        False,
    )


def pr_test_cell(up: dict[str, Any], fx: dict[str, Any]) -> Cell:
    """The PR's own test without and with the fix: exit code and its two counts apart, coloured by
    what the cell says (an abort after the fix with no wrong token is not the bug showing)."""
    if not up and not fx:
        return Cell("not run", "")

    def said(r: dict[str, Any]) -> str:
        space, prefix = bad_tokens(r)
        counts = [f"{space} with a space"] * bool(space) + [f"{prefix} not a prefix"] * bool(prefix)
        return f"{r.get('pr_test_exit', '?')}" + (f" ({', '.join(counts)})" if counts else "")

    short, _, same = abort_cause(up, fx)
    text = f"{said(up)} → {said(fx)}" + (f": {short}" if short else "")
    if fx.get("pr_test_exit") == 0:
        return Cell(text, "fixed" if up.get("pr_test_exit") not in (0, None, "") else "ok")
    if any(bad_tokens(fx)):
        return Cell(text, "bad")
    return Cell(text, SAME if same else "bad")


def time_cost(res: Results) -> dict[str, Any] | None:
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
    machine = (
        next(
            (
                line.removeprefix("Machine: ").rstrip(".")
                for line in md.read_text(encoding="utf-8").splitlines()
                if line.startswith("Machine: ")
            ),
            "",
        )
        if md.exists()
        else ""
    )
    return {
        "cells": [f"{v} {us[(v, 'upstream')]:.3g} / {us[(v, 'fixed')]:.3g}" for v in vocabs],
        "worst": f"{ratio[worst]:.2f}" if worst else "1.00",
        "worst_vocab": worst,
        "best": f"{min(ratio.values()):.2f}" if ratio else "1.00",
        "link": res.link(md, "bench.md"),
        "machine": machine,
    }


def _server_frame(res: Results) -> pd.DataFrame:
    """The server's rows on llguidance as llama.cpp pins it, the matrix's cases without the controls."""
    ok, _ = res.load("server")
    served = pd.DataFrame([row for r in ok for row in r["rows"]]) if ok else pd.DataFrame()
    if served.empty:
        return served
    pin = LLG_PINNED if (served.llguidance == LLG_PINNED).any() else sorted(served.llguidance.unique())[0]
    return served[served.llguidance == pin].rename(columns={"sampler": "bridge"})


def recommend(
    broken: list[str], worse: list[str], ctest: dict[str, tuple[Any, Any]], follow_ups: list[dict[str, str]]
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
    ok = all(r["holds"] for r in rules)
    call = (
        ("approve" if not follow_ups else f"approve, with {len(follow_ups)} follow-up{'s' * (len(follow_ups) != 1)}")
        if ok
        else "request changes"
        if any(r["holds"] is False for r in rules)
        else "none yet: a rule is not measured"
    )
    return {"call": call, "rules": rules, "follow_ups": follow_ups if ok else [], "ok": ok}


@takes_results
def verdict(res: Results) -> Verdict | None:
    """The reviewer's questions, answered from the results, and one row per input."""
    census, _ = res.load("census")
    if not census:
        return None
    info = {r["vocab"]: r["summary"] for r in census}
    frames = {}
    for name in ("leak", "forced"):
        ok, _ = res.load(name)
        frames[name] = result_rows(ok) if ok else pd.DataFrame(columns=["vocab", "bridge"])
    probe_ok, _ = res.load("probe")
    probes = {r["vocab"]: r["probe"] for r in probe_ok}
    native_ok, _ = res.load("native")
    native = {(r["vocab"], row["sampler"]): row for r in native_ok for row in pinned_rows(r)}
    matrix_ok, _ = res.load("matrix")
    matrix = pd.DataFrame([row for r in matrix_ok for row in r["rows"]]) if matrix_ok else pd.DataFrame()
    # end to end: from the real llama-server where it ran, else from the port's matrix
    served_all = _server_frame(res)
    served = served_all[~served_all.case.isin(SERVER_CONTROLS)] if not served_all.empty else served_all
    leak, forced = frames["leak"], frames["forced"]

    rows: list[dict[str, Any]] = []
    hit_a: list[str] = []
    hit_b: list[str] = []
    repaired: list[str] = []
    broken: list[str] = []
    costs: list[Any] = []
    worse: list[str] = []
    aborts: list[dict[str, Any]] = []
    for v in guide_order(list(info)):
        s = info[v]
        up_leak, fx_leak = (
            cell_value(leak, v, "upstream", "allowed_illegal"),
            cell_value(leak, v, "fixed", "allowed_illegal"),
        )
        up_np, fx_np = cell_value(forced, v, "upstream", "not_prefix"), cell_value(forced, v, "fixed", "not_prefix")
        up_ok, fx_ok = cell_value(forced, v, "upstream", "output_ok"), cell_value(forced, v, "fixed", "output_ok")
        up_err = cell_value(forced, v, "upstream", "error") or ""
        p = probes.get(v, {})
        a = bool(s["differing"]) or bool(up_leak)
        b = bool(up_np) or (up_ok is not None and not bool(up_ok))
        fix_ok = not fx_leak and not fx_np and (fx_ok is None or bool(fx_ok))
        greedy = bool(p.get("greedy"))
        (hit_a if a else []).append(v)
        (hit_b if b else []).append(v)
        if a or b:
            (repaired if fix_ok else broken).append(v)
        if greedy:
            costs.append(v)
        n_up, n_fx = native.get((v, "upstream"), {}), native.get((v, "fixed"), {})
        # worse with the fix than without, on any measure the suite has
        if (
            int(fx_leak or 0) > int(up_leak or 0)
            or (bool(fx_np) and not up_np)
            or (n_fx.get("pr_test_exit") not in (None, "", 0) and n_up.get("pr_test_exit") == 0)
        ):
            worse.append(v)
        e2e: Cell | str = Cell("not run", "")
        for source, frame in (("llama-server", served), ("port", matrix)):
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
                if source == "llama-server":
                    fails_fx = set(m[(m.bridge == "fixed") & (m.outcome != "pass")].case)
                    if fails_fx - set(m[(m.bridge == "upstream") & (m.outcome != "pass")].case):
                        worse.append(v)
                break
        short, why, same = abort_cause(n_up, n_fx)
        if short:
            aborts.append({"vocab": v, "why": why, "same": same, "short": short})
        fx_forced = "" if fx_np is None else ("ok" if not fx_np and fx_ok else "FAILS")
        rows.append(
            {
                "input": v,
                "type": s.get("vocab_type", "") + (" · real model" if v in REAL_MODELS else ""),
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
                "bug B: grammar dropped": Cell("yes" if up_err else "no", shows(up_err)),
                "with the fix: illegal admitted": Cell("not run", "")
                if fx_leak is None
                else Cell(fx_leak, after_fix(up_leak, fx_leak)),
                "with the fix: forced mask": Cell("not run", "")
                if fx_np is None
                else Cell(fx_forced, after_fix(b, fx_forced == "FAILS")),
                "with the fix: tokenizer": Cell("greedy" if greedy else "tokenize_fn", "cost" if greedy else "ok"),
                "the PR's test: exit without → with": pr_test_cell(n_up, n_fx),
                "end to end: cases passed without → with": e2e,
            }
        )
    spm_like = {"SPM"}
    beyond = [v for v in hit_b if info[v].get("vocab_type") not in spm_like]
    n = len(info)
    figs = guide_figures(res)
    n_matched = sum(ok for _, ok in figs)
    port = None
    if native_ok:
        port_llg = metadata.version("llguidance")
        same_llg = [row for r in native_ok for row in r["rows"] if row.get("llguidance", port_llg) == port_llg]
        cells = sum(int(row.get("diff_cells") or 0) for row in same_llg)
        differ = sum(int(row.get("diff_differ") or 0) for row in same_llg)
        port = {"agree": cells - differ, "cells": cells, "differ": differ, "vocabs": len(native_ok)}
    ctest = {
        v: (native[(v, "upstream")].get("pr_test_exit"), native[(v, "fixed")].get("pr_test_exit"))
        for v in CTEST_VOCABS
        if (v, "upstream") in native and (v, "fixed") in native
    }
    passing = sorted(
        (v for v in info if (native.get((v, "fixed")) or {}).get("pr_test_exit") == 0),
        key=guide_order(list(info)).index,
    )
    # beyond the PR (bug C, bug D), from the compiled samplers
    special = [row for r in native_ok for row in r.get("special", [])]
    walked = sorted({x["vocab"] for x in special if x.get("sampler") == "fixed"})
    c_hit = sorted(
        {x["vocab"] for x in special if x.get("sampler") == "fixed" and x.get("steps") and not x.get("complete")}
    )
    c_fix = sorted({x["vocab"] for x in special if x.get("sampler") == "nospecial" and x.get("complete")} & set(c_hit))
    spelled = {(x["vocab"], x["sampler"]): (x.get("complete"), x.get("spelled"), x.get("error")) for x in special}
    c_same = [v for v in c_hit if spelled.get((v, "upstream")) == spelled.get((v, "fixed"))]
    bug_c = None
    if c_hit:
        ex = next(
            x
            for x in special
            if x.get("sampler") == "fixed" and x["vocab"] == ("llama-bpe" if "llama-bpe" in c_hit else c_hit[0])
        )
        bug_c = {
            "hit": c_hit,
            "vocab": ex["vocab"],
            "literal": ex["literal"],
            "spelled": ex["spelled"],
            "walked": len(walked),
            "allowed": ex["stop_allowed_pieces"],
            "repaired": len(c_fix),
            "same": len(c_same),
            "without": sorted(set(info) - set(walked)),
            "patch": CANDIDATE_PATCHES["C"],
        }
    d_rows = [x for x in aborts if x["short"].startswith("bug D")]
    bug_d: dict[str, Any] | None = (
        {"hit": [x["vocab"] for x in d_rows], "same": all(x["same"] for x in d_rows), "patch": CANDIDATE_PATCHES["D"]}
        if d_rows
        else None
    )
    loads = [x for x in res.server_load.to_dict("records")] if not served.empty else []
    loads = [x for x in loads if x["model"] in set(served.model)]
    server = None
    ignored: dict[str, Any] | None = None
    overridden_here = {v: m for v, m in overridden().items() if v in info}
    real_weight = []
    if not served.empty:
        up = served[served.bridge == "upstream"]
        silent = up[(up.outcome != "pass") & (up.http_status == 200) & ~up.error_field.astype(bool)]
        server = {
            "silent": len(silent),
            "failing": int((up.outcome != "pass").sum()),
            "models": served.model.nunique(),
            "fixed_bad": len(served[(served.bridge == "fixed") & (served.outcome == "violation")]),
            **load_verdict(loads),
            "real": int(served[~served.synthetic.astype(bool)].vocab.nunique()) if "synthetic" in served else 0,
        }
        # the guide's real-weight rows (TinyLlama, Mistral, Hermes: SentencePiece with the space prefix), on a
        # trained model loaded with llama.cpp's own override: its three server cases without and with the fix
        for v in overridden_here:
            g = served[(served.vocab == v) & served.case.isin(guide.SERVER_CASES)]
            if not g.empty:
                real_weight.append(
                    {
                        "input": v,
                        "up": int((g[g.bridge == "upstream"].outcome == "pass").sum()),
                        "fx": int((g[g.bridge == "fixed"].outcome == "pass").sum()),
                        "n": len(guide.SERVER_CASES),
                        "silent": int(
                            (
                                (g.bridge == "upstream")
                                & (g.outcome != "pass")
                                & (g.http_status == 200)
                                & ~g.error_field.astype(bool)
                            ).sum()
                        ),
                    }
                )
        rej = served_all[served_all.case == "rejected_schema"]
        if not rej.empty:
            ign = rej[rej.outcome == "ignored"]
            ignored = {
                "n": len(ign),
                "of": len(rej),
                "both": set(ign.bridge) >= {"upstream", "fixed"},
                "issues": UPSTREAM["ignored"],
            }
    # what the suite finds the guide wrong about, and the figures that differ
    probe = probe_robustness(res)
    moved = xff_moved(census)
    cause = sentinel_cause(res)
    srv_rows = guide_server_rows(res)
    disagreements = []
    if probe and probe["misses"]:
        disagreements.append(
            f"**The probe is not robust as the guide says** (question 4): it calls {probe['probe_exact']} of "
            f"{probe['n_probed']} vocabs' `llama_tokenize` exact, and on {len(probe['misses'])} of those some inputs "
            f"still come back with other bytes ({probe['specials']} only on special-token text); the PR keeps that "
            f"`tokenize_fn` there."
        )
    if moved["moved"]:
        disagreements.append(
            f"**The `\\xff` branch is not entered by the same tokens on every vocab** (4.5): on {len(moved['moved'])} "
            f"of {moved['n']} vocabs a token whose piece is a lone space reaches llguidance as zero bytes without the "
            f"fix and as `' '` with it."
        )
    if cause and cause["n"] and cause["table"]:
        disagreements.append(
            f"**The sentinel's illegal tokens come from its token table, not from prefix-and-strip** (5.2, question "
            f"2): every one the suite stored ({cause['stored']} of {cause['n']}) is a token with no real bytes that "
            f"the table gives its special text."
        )
    srv_differ = [r for r in srv_rows if r["match"] == "✗"]
    if srv_differ:
        disagreements.append(
            "**Guide 8's server table:** "
            + "; ".join(f"{r['guide']} (standing in: {r.get('stand_in', '')}): {r['why_short']}" for r in srv_differ)
            + "."
        )
    missed = [name for name, ok in figs if not ok]
    if missed:
        disagreements.append(f"**Figures that differ:** {', '.join(missed)}.")
    follow_ups = []
    if bug_c and bug_c["same"] == len(bug_c["hit"]):
        follow_ups.append({"what": f"bug C on {len(c_hit)} of {len(walked)} vocabs", "patch": CANDIDATE_PATCHES["C"]})
    if bug_d and bug_d["same"]:
        follow_ups.append({"what": f"bug D on {len(bug_d['hit'])}", "patch": CANDIDATE_PATCHES["D"]})
    if ignored and ignored["both"]:
        follow_ups.append(
            {"what": "the ignored schema", "patch": "", "issues": ", ".join(f"#{n}" for n, _, _ in ignored["issues"])}
        )
    timing = time_cost(res)
    rec = recommend(broken, sorted(set(worse), key=guide_order(list(info)).index), ctest, follow_ups)
    said = blocks(
        "verdict",
        n=n,
        hit_a=hit_a,
        hit_b=hit_b,
        beyond=[f"{x} ({info[x].get('vocab_type')})" for x in beyond],
        broken=broken,
        repaired=repaired,
        costs=costs,
        time=timing,
        matched=n_matched,
        figures=len(figs),
        port=port,
        aborts=aborts,
        abort_groups=[
            {"why": w, "vocabs": [x["vocab"] for x in aborts if x["why"] == w]}
            for w in dict.fromkeys(x["why"] for x in aborts)
        ],
        passing=passing,
        n_native=len({v for v, _ in native}),
        ctest=ctest,
        bug_c=bug_c,
        bug_d=bug_d,
        server=server,
        ignored=ignored,
        url=ISSUES_URL,
        issue_b=UPSTREAM["B"][0],
        overridden=[f"`{v}`" for v in overridden_here],
        real_weight=real_weight,
        why={v: m.why for v, m in overridden_here.items()},
    )
    sentences = [line.removeprefix("- ") for line in said["sentences"].splitlines() if line.strip()]
    facts = {
        "n": n,
        "hit_a": hit_a,
        "hit_b": hit_b,
        "beyond": beyond,
        "repaired": repaired,
        "broken": broken,
        "costs": costs,
        "time": timing,
        "matched": n_matched,
        "figures": len(figs),
        "port": port,
        "aborts": aborts,
        "passing": passing,
        "ctest": ctest,
        "bug_c": bug_c,
        "bug_d": bug_d,
        "server": server,
        "ignored": ignored,
        "census": info,
        "upstream": UPSTREAM,
    }
    return Verdict(sentences, pd.DataFrame(rows), (n_matched, len(figs)), rec, disagreements, facts)


def recommendation_md(rec: dict[str, Any]) -> str:
    """The rules behind the call, each with its mark, then the follow-ups (Markdown, one paragraph)."""
    if not rec:
        return ""
    mark = {True: "✓", False: "✗", None: "not measured:"}
    rules = "; ".join(
        f"{mark[r['holds']]} {r['rule']}" + (f" ({r['why']})" if r["why"] and r["holds"] is False else "")
        for r in rec["rules"]
    )
    if rec["ok"]:
        said = f"The rules: {rules}; all three hold, so approve."
    elif any(r["holds"] is False for r in rec["rules"]):
        said = f"The rules: {rules}; one fails, so ask for changes."
    else:
        said = f"The rules: {rules}; run `make report` with the native build to decide."
    if rec["follow_ups"]:
        said += (
            " Each finding beyond the PR that is the same before and after it becomes a follow-up, not a reason to "
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
