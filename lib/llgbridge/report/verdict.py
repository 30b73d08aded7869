"""The verdict: what happened, per bug and per input, first on the page."""

from __future__ import annotations

import json
from importlib import metadata
from typing import Any
from dataclasses import dataclass

import pandas as pd

from .. import guide
from ..models import REAL_MODELS, overridden
from ..server import LLG_PINNED
from .data import Results, takes_results
from .prose import blocks
from .table import Cell, Table, after_fix, cell_value, guide_order, pinned_rows, result_rows, shows, values
from .server import SERVER_CONTROLS


@dataclass
class Verdict:
    sentences: list[str]
    df: pd.DataFrame  # one row per input, its cells coloured
    reproduced: tuple[int, int]  # (guide figures matched, guide figures compared)

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
            out.append((f"4.3 example {v}", bool(d) and (d["piece"], d["detok"]) == (piece.decode(), detok.decode())))
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
            for b, want in zip(("upstream", "fixed"), guide.FORCED[r["vocab"]]):
                got = sorted(json.loads(rows[b]["pieces"])) if b in rows and rows[b].get("pieces") else None
                out.append((f"7.2 {r['vocab']} {b}", got == sorted(p.decode() for p in want)))
    native, _ = res.load("native")
    for r in native:
        rows = {x["sampler"]: x for x in pinned_rows(r)}
        if r["vocab"] in guide.UNIT:
            for s, want in zip(("upstream", "fixed"), guide.UNIT[r["vocab"]]):
                out.append((f"7.1 {r['vocab']} {s}", (rows.get(s, {}).get("pr_test_exit"), rows.get(s, {}).get("no_space_bad")) == tuple(want)))
    return out


def abort_reason(row: dict[str, Any]) -> str:
    """Why the PR's test exits non-zero on the fixed build: the cause the native analysis named
    from what the test and the sampler did (`native.causes`), or, in a result made before it did,
    the same two causes read from the row."""
    if row.get("pr_test_cause"):
        return str(row["pr_test_cause"])
    err = str(row.get("pr_test_llg_error") or "")
    fail = str(row.get("pr_test_failure") or "")
    if "Too many items" in err:
        return "a mask over step_max_items (50000): grammar dropped"
    if row.get("tok_eos") == -1:
        return "tok_eos = -1 (no EOT, no EOS)"
    return f"cause not classified: {(fail or err)[:80] or 'aborted'}"


def time_cost(bench: pd.DataFrame, link: str) -> dict[str, Any] | None:
    """The fix's time cost, from the committed `make bench` snapshot: mask ms per generated token,
    upstream / fixed per vocab, and the largest ratio (None without a snapshot)."""
    if bench.empty:
        return None
    m = bench[(bench.benchmark == "mask_per_token") & bench.variant.isin(["upstream", "fixed"])]
    if m.empty:
        return None
    ms = {(r.vocab, r.variant): 1000 * float(r.seconds) for r in m.itertuples()}
    vocabs = list(dict.fromkeys(m.vocab))
    cells = [f"{v} {ms[(v, 'upstream')]:.2f} / {ms[(v, 'fixed')]:.2f}" for v in vocabs if (v, "upstream") in ms and (v, "fixed") in ms]
    worst = max((ms[(v, "fixed")] / ms[(v, "upstream")] for v in vocabs if (v, "upstream") in ms and (v, "fixed") in ms), default=1.0)
    return {"cells": cells, "worst": f"{worst:.2f}", "link": link}


@takes_results
def verdict(res: Results) -> Verdict | None:
    """The reviewer's four questions, answered from the results, and one row per input."""
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
    # end to end: from the real llama-server where it ran (llguidance as llama.cpp pins it, the
    # matrix's cases without the controls), else from the port's matrix
    server_ok, _ = res.load("server")
    served = pd.DataFrame([row for r in server_ok for row in r["rows"]]) if server_ok else pd.DataFrame()
    if not served.empty:
        pin = LLG_PINNED if (served.llguidance == LLG_PINNED).any() else sorted(served.llguidance.unique())[0]
        served = served[(served.llguidance == pin) & ~served.case.isin(SERVER_CONTROLS)].rename(columns={"sampler": "bridge"})
    leak, forced = frames["leak"], frames["forced"]

    rows, hit_a, hit_b, repaired, broken, costs = [], [], [], [], [], []
    for v in guide_order(list(info)):
        s = info[v]
        up_leak, fx_leak = cell_value(leak, v, "upstream", "allowed_illegal"), cell_value(leak, v, "fixed", "allowed_illegal")
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
        pr_up, pr_fx = n_up.get("pr_test_exit", ""), n_fx.get("pr_test_exit", "")
        bad_up = int(n_up.get("no_space_bad") or 0) + int(n_up.get("forced_bad") or 0)
        bad_fx = int(n_fx.get("no_space_bad") or 0) + int(n_fx.get("forced_bad") or 0)
        e2e = ""
        for source, frame in (("llama-server", served), ("port", matrix)):
            m = frame[frame.vocab == v] if not frame.empty else frame
            if not m.empty:
                kind = "synthetic model" if bool(m.synthetic.iloc[0]) else "real model"
                e2e = " / ".join(f"{int((m[m.bridge == br].outcome == 'pass').sum())}/{len(m[m.bridge == br])}"
                                 for br in ("upstream", "fixed")) + f" ({source}, {kind})"
                break
        fx_forced = "" if fx_np is None else ("ok" if not fx_np and fx_ok else "FAILS")
        # "repaired" only where the fixed build's test passes: an abort after the fix is not a repair
        pr_cls = "bad" if bad_fx or pr_fx not in ("", 0) else ("fixed" if bad_up or pr_up not in ("", 0) else "ok")
        rows.append({
            "input": v, "type": s.get("vocab_type", "") + (" · real model" if v in REAL_MODELS else ""),
            "A: wrong tokens": Cell(s["differing"], shows(s["differing"])),
            "A: leaks": Cell("" if up_leak is None else up_leak, shows(up_leak)),
            "B: tokenize exact": Cell("" if not p else ("yes" if p.get("tokenize_exact") else "no"), shows(p and not p.get("tokenize_exact"))),
            "B: forced mask": Cell("" if up_np is None else ("ok" if not up_np else f"{up_np} not prefix"), shows(up_np)),
            "B: matcher dies": Cell("yes" if up_err else "no", shows(up_err)),
            "fix: leaks": "" if fx_leak is None else Cell(fx_leak, after_fix(up_leak, fx_leak)),
            "fix: forced": "" if fx_np is None else Cell(fx_forced, after_fix(b, fx_forced == "FAILS")),
            "fix: tokenizer": Cell("greedy" if greedy else "tokenize_fn", "cost" if greedy else "ok"),
            "fix: byte forcing": Cell("lost" if greedy else "kept", "cost" if greedy else "ok"),
            # why an abort after the fix happens is said once, in the sentences above the table
            "PR test without / with fix: exit (bad tokens)": Cell(f"{pr_up} ({bad_up}) / {pr_fx} ({bad_fx})", pr_cls) if pr_up != "" else "",
            "end to end: cases passed without / with": e2e,
        })
    spm_like = {"SPM"}
    beyond = [v for v in hit_b if info[v].get("vocab_type") not in spm_like]
    n = len(info)
    figs = guide_figures(res)
    n_matched = sum(ok for _, ok in figs)
    port = None
    if native_ok:
        port_llg = metadata.version("llguidance")
        same = [row for r in native_ok for row in r["rows"] if row.get("llguidance", port_llg) == port_llg]
        cells = sum(int(row.get("diff_cells") or 0) for row in same)
        differ = sum(int(row.get("diff_differ") or 0) for row in same)
        port = {"agree": cells - differ, "cells": cells, "differ": differ, "vocabs": len(native_ok)}
    aborts = [v for v in info if (native.get((v, "fixed")) or {}).get("pr_test_exit") not in (None, "", 0)]
    # beyond the PR (bug C, bug D), from the compiled samplers
    special = [row for r in native_ok for row in r.get("special", [])]
    c_hit = sorted({x["vocab"] for x in special if x.get("sampler") == "fixed" and x.get("steps") and not x.get("complete")})
    c_fix = sorted({x["vocab"] for x in special if x.get("sampler") == "nospecial" and x.get("complete")} & set(c_hit))
    bug_c = None
    if c_hit:
        ex = next(x for x in special if x.get("sampler") == "fixed" and x["vocab"] == ("llama-bpe" if "llama-bpe" in c_hit else c_hit[0]))
        bug_c = {"hit": c_hit, "vocab": ex["vocab"], "literal": ex["literal"], "spelled": ex["spelled"],
                 "allowed": ex["stop_allowed_pieces"], "repaired": len(c_fix)}
    d_hit = sorted(v for v in info if "Too many items" in str((native.get((v, "fixed")) or {}).get("pr_test_llg_error", "")))
    # make bench's snapshot, on the models served here
    served_models = set() if served.empty else set(served.model)
    loads = [x for x in res.server_load.to_dict("records") if x["model"] in served_models]
    server = None
    overridden_here = {v: m for v, m in overridden().items() if v in info}
    real_weight = []
    if not served.empty:
        up = served[served.bridge == "upstream"]
        silent = up[(up.outcome != "pass") & (up.http_status == 200) & ~up.error_field.astype(bool)]
        server = {"silent": len(silent), "failing": int((up.outcome != "pass").sum()),
                  "fixed_bad": len(served[(served.bridge == "fixed") & (served.outcome == "violation")]),
                  "load_bad": sum(int(x.get("violations") or 0) for x in loads if x.get("sampler") == "fixed"), "load_run": bool(loads),
                  "real": int(served[~served.synthetic.astype(bool)].vocab.nunique()) if "synthetic" in served else 0}
        # the guide's real-weight rows (TinyLlama, Mistral, Hermes: SentencePiece with the space prefix), on a
        # trained model loaded with llama.cpp's own override: its three server cases without and with the fix
        for v in overridden_here:
            g = served[(served.vocab == v) & served.case.isin(guide.SERVER_CASES)]
            if not g.empty:
                real_weight.append({"input": v, "up": int((g[g.bridge == "upstream"].outcome == "pass").sum()),
                                    "fx": int((g[g.bridge == "fixed"].outcome == "pass").sum()), "n": len(guide.SERVER_CASES),
                                    "silent": int(((g.bridge == "upstream") & (g.outcome != "pass") & (g.http_status == 200)
                                                   & ~g.error_field.astype(bool)).sum())})
    said = blocks("verdict", n=n, hit_a=hit_a, hit_b=hit_b, beyond=[f"{x} ({info[x].get('vocab_type')})" for x in beyond],
                  broken=broken, repaired=repaired, costs=costs,
                  time=time_cost(res.bench, res.link(res.bench_csv.with_suffix(".md"), "bench.md")),
                  matched=n_matched, figures=len(figs), missed=[name for name, ok in figs if not ok], port=port,
                  aborts=[f"{v} ({abort_reason(native[(v, 'fixed')])})" for v in aborts], bug_c=bug_c, bug_d=d_hit, server=server,
                  overridden=[f"`{v}`" for v in overridden_here], real_weight=real_weight,
                  why={v: m.why for v, m in overridden_here.items()})
    sentences = [line.removeprefix("- ") for line in said["sentences"].splitlines() if line.strip()]
    return Verdict(sentences, pd.DataFrame(rows), (n_matched, len(figs)))
