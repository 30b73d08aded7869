"""Server level (guide 8): the real llama-server, both builds, every case and control."""

from __future__ import annotations

from typing import Any

import pandas as pd

from .. import guide
from .. import serving
from ..native import version_key
from ..server import LLG_PINNED
from ..show import show_text
from .data import Results, takes_results
from .prose import blocks, prose
from .table import Cell, Section, Table, after_fix, int_columns, shows


SERVER_CONTROLS = ("json_enum_gbnf", "json_enum_chat", "rejected_schema", "special_literal")


def server_frame(ok: list[dict[str, Any]]) -> pd.DataFrame:
    df = pd.DataFrame([row for r in ok for row in r["rows"]])
    order = {c: i for i, c in enumerate(("forced_literal", "json_enum", "half_free", "dots", "no_space", *SERVER_CONTROLS))}
    df["_c"] = df["case"].map(lambda c: order.get(c, 99))
    df = df.sort_values(["synthetic", "model", "llguidance", "sampler", "_c"], ascending=[False, True, True, False, True],
                        kind="stable").drop(columns="_c").reset_index(drop=True)
    return int_columns(df)


def server_score(x: pd.DataFrame) -> str:
    """'passed/cases, N llg errors', and how many violations came back as HTTP 200 with no error field."""
    if x.empty:
        return ""
    n_err = int(x.llg_errors.sum())
    silent = int(((x.outcome == "violation") & (x.http_status == 200) & ~x.error_field.astype(bool)).sum())
    other = ", ".join(f"{k} {v}" for k, v in sorted(x.outcome.value_counts().items()) if k not in ("pass", "violation"))
    s = f"{int((x.outcome == 'pass').sum())}/{len(x)}, {n_err} llg error{'s' if n_err != 1 else ''}"
    if silent:
        s += f"; {silent} HTTP 200, no error field"
    return s + (f" ({other})" if other else "")


def ignored_summary(df: pd.DataFrame, llg: str) -> str:
    x = df[(df.case == "rejected_schema") & (df.llguidance == llg)]
    if x.empty:
        return "not measured"
    ign = x[x.outcome == "ignored"]
    return (f"ignored on {len(ign)} of {len(x)} requests (HTTP 200, no error field, unconstrained text)"
            + (", on both builds" if set(ign.sampler) >= {"upstream", "fixed"} else ""))


def quote_table(snap: dict[str, Any] | None, served: set[str]) -> Table | None:
    """The guide's pre-fix quotes beside the same cases on real weights, from the dated snapshot
    (`quotes`, make quotes / make bench) of an input this report serves; None without one."""
    if not snap:
        return None
    rows = []
    for q in snap.get("inputs", []):
        if q.get("input") not in served:
            continue
        got = {(r["case"], r["sampler"]): r for r in q.get("rows", [])}
        for case, (theirs, bug) in guide.QUOTES.items():
            up, fx = got.get((case, "upstream")), got.get((case, "fixed"))
            if up is None:
                continue

            def said(r: dict[str, Any] | None) -> Cell | str:
                if r is None:
                    return ""
                text = show_text(r["content"][:110]) + ("…" if len(r["content"]) > 110 else "")
                return Cell(f"{text} (HTTP {r['http_status']}, {'an' if r['error_field'] else 'no'} error field)",
                            "ok" if r["grammar_kept"] else "bad")

            rows.append({"case": case, "bug": bug, "the guide (TinyLlama-1.1B, without fix)": theirs,
                         f"{q['input']}, without fix": said(up), "with fix": said(fx),
                         "llg error in the server's log (without fix)": up.get("llg_error", "")})
    if not rows:
        return None
    return Table(pd.DataFrame(rows), caption=f"The guide's quotes, and the same cases on real weights (llama-server's `content`, "
                                             f"llguidance {snap['inputs'][0].get('llguidance', '')})",
                 note=(f"From the dated snapshot `make quotes` (and `make bench`) wrote on {snap.get('date')}, on a {snap.get('cpu')} "
                       "(reports/bench-real-quotes.json), not from this report's results: a real model's words depend on the CPU "
                       "(the venv's ggml is built -march=native, so at temperature 0 a near-tie can break another way on another "
                       "machine of the same kind), and every committed table must regenerate byte for byte. What the grammar "
                       "decides, the outcome, is the report's own, in the tables above."))


@takes_results
def server_section(res: Results) -> Section | None:
    ok, failed = res.load("server")
    if not ok:
        return None
    df = server_frame(ok)
    versions_run = sorted({v for r in ok for v in r["llguidance"]}, key=version_key)
    pinned = LLG_PINNED if LLG_PINNED in versions_run else versions_run[0]
    sec = Section("server", "Server level: the real llama-server (guide 8)", notebook="server")
    main = df[~df.case.isin(SERVER_CONTROLS)]
    guide3 = main[main.case.isin(guide.SERVER_CASES)]
    # the guide's table, from the build llama.cpp links (llguidance as it pins it)
    rows = []
    for model, g in guide3[guide3.llguidance == pinned].groupby("model", sort=False):
        up, fx = g[g.sampler == "upstream"], g[g.sampler == "fixed"]
        kind = "synthetic" if bool(g.synthetic.iloc[0]) else "real"
        stands = [m for m, (fx_name, _) in guide.SERVER_STAND_IN.items() if kind == "synthetic" and fx_name == g.vocab.iloc[0]]
        stands += [f"{m} (real weights)" for m in guide.SERVER_REAL_STAND_IN.get(g.vocab.iloc[0], ())]
        up_bad, fx_bad = bool((up.outcome != "pass").any()), bool((fx.outcome != "pass").any())
        rows.append({"model": f"{model} ({kind})", "vocab": g.vocab.iloc[0], "stands in for": ", ".join(stands),
                     "without fix": Cell(server_score(up), shows(up_bad)), "with fix": Cell(server_score(fx), after_fix(up_bad, fx_bad)),
                     "greedy engaged": Cell("yes", "cost") if bool(fx.greedy.any()) else "no"})
    for f in failed:
        rows.append({"model": f["vocab"], "vocab": f["vocab"], "stands in for": "",
                     "without fix": Cell(f"failed: {f.get('error', '')}", "bad"), "with fix": Cell("failed", "bad"), "greedy engaged": ""})
    served_vocabs = set(df.vocab)
    real_for = {m: v for v, ms in guide.SERVER_REAL_STAND_IN.items() if v in served_vocabs for m in ms}
    theirs = pd.DataFrame([{"model": m, "tokenizer": t, "without fix": a, "with fix": b, "greedy engaged": c,
                            "our stand-in": f"{guide.SERVER_STAND_IN[m][0]} ({guide.SERVER_STAND_IN[m][1]})"
                                            + (f"; {real_for[m]} (real weights, the same tokenizer behaviour)" if m in real_for else "")}
                           for m, (t, a, b, c) in guide.SERVER.items()])
    # every case, both llguidance versions
    full = []
    for (model, llg), g in main.groupby(["model", "llguidance"], sort=False):
        full.append({"model": model, "llguidance": llg, "without fix": server_score(g[g.sampler == "upstream"]),
                     "with fix": server_score(g[g.sampler == "fixed"])})
    # the controls: GBNF from the same schema, and the chat endpoint's response_format
    ctrl = []
    for (model, case), g in df[df.case.isin(SERVER_CONTROLS) & (df.case != "special_literal") & (df.llguidance == pinned)].groupby(["model", "case"], sort=False):
        ctrl.append({"model": model, "case": case, **{s: (f"{x.outcome.iloc[0]} (HTTP {x.http_status.iloc[0]})"
                                                          + (f": {x.error.iloc[0]}" if x.error.iloc[0] else ""))
                                                      for s, x in g.groupby("sampler", sort=False)}})
    # llguidance 1.0.1 against the venv's: every cell whose outcome or output differs
    key = ["model", "sampler", "case"]
    by_v = {v: df[df.llguidance == v].set_index(key) for v in versions_run}
    vdiff = []
    if len(versions_run) == 2:
        a, b = (by_v[v] for v in versions_run)
        for k in a.index.intersection(b.index):
            ra, rb = a.loc[k], b.loc[k]
            if ra.outcome != rb.outcome or ra.output != rb.output or ra.llg_errors != rb.llg_errors:
                vdiff.append({"model": k[0], "sampler": k[1], "case": k[2], **{f"llguidance {versions_run[0]}": f"{ra.outcome}: {show_text(ra.output[:80])}",
                              f"llguidance {versions_run[1]}": f"{rb.outcome}: {show_text(rb.output[:80])}"}})
    # the port's matrix against the server, on the llguidance the port drives
    matrix_ok, _ = res.load("matrix")
    by_vocab = {r["vocab"]: r for r in matrix_ok}
    cells: list[dict[str, Any]] = []
    for r in ok:
        m = by_vocab.get(r["vocab"])
        if m is not None:
            cells += [c.row() for c in serving.differential(m, r)]
    dd = pd.DataFrame(cells)
    n_cells, n_diff = len(dd), int((~dd.same).sum()) if len(dd) else 0
    # the load test: `make bench`'s snapshot (its outcomes vary from run to run), not the results',
    # on the models served here (a what-if report serves others)
    load = res.server_load
    if not load.empty:
        load = load[load.model.isin(set(df.model))].reset_index(drop=True)
    quotes = main[(main.sampler == "upstream") & (main.outcome != "pass") & (main.llguidance == pinned)]
    silent_up = quotes[(quotes.http_status == 200) & ~quotes.error_field.astype(bool)]
    fixed_bad = main[(main.sampler == "fixed") & (main.outcome == "violation")]
    sec.views.append(Table(pd.DataFrame(rows), caption=f"The guide's server table, regenerated (its three cases; llguidance {pinned})",
                           note=blocks("server", only=("note",), quotes=list(quotes.itertuples()))["note"]))
    sec.views.append(Table(theirs, caption="The guide's own rows, and the fixture whose tokenizer stands in for each model"))
    quoted = quote_table(res.real_quotes, served_vocabs)
    if quoted is not None:
        sec.views.append(quoted)
    sec.views.append(Table(pd.DataFrame(full), caption="Every case (adds dots and no_space), per llguidance version"))
    if ctrl:
        sec.views.append(Table(pd.DataFrame(ctrl), caption=f"Controls (llguidance {pinned}): GBNF from the same schema; the chat endpoint; "
                                                           "a schema llguidance cannot compile"))
    under_load: list[str] = []
    load_on_gbnf = False
    load_said: dict[str, Any] | None = None
    if not load.empty:
        models = load.model.nunique()
        load_said = {"requests": int(load.requests.iloc[0]), "parallel": int(load.parallel.iloc[0]), "models": models,
                     "builds": len(load) // models,
                     "healthy": bool(load.healthy_after.astype(str).eq("True").all())}
        fx_load = load[(load.sampler == "fixed") & (pd.to_numeric(load.violations, errors="coerce").fillna(0) > 0)]
        under_load = [f"{r.model} on llguidance {r.llguidance}, {r.violations} of {r.requests} requests ({r.violating})"
                      for r in fx_load.itertuples()]
        load_on_gbnf = bool(fx_load.violating.str.contains("json_enum_gbnf").any()) if len(fx_load) else False
        sec.views.append(Table(load, caption=f"Load: {load.requests.iloc[0]} constrained requests over {load.parallel.iloc[0]} slots at once, "
                                             "every output judged (differ from sequential: the same case's outcome one request at a time)",
                               note=f"Measured by `make bench` ({res.link(res.bench_csv.with_suffix('.md'), 'bench.md')}), not by `make report`: "
                                    "how the server batches concurrent requests changes from run to run, and with it, on some runs, the "
                                    "outcome; this is that run's snapshot."))
    bug_c: dict[str, int] | None = None
    special = df[(df.case == "special_literal") & (df.llguidance == pinned)]
    if not special.empty:
        lit = {r["vocab"]: (r.get("cases", {}).get("special_literal", {}).get("grammar", "")) for r in ok}
        sp_rows = []
        for model, g in special.groupby("model", sort=False):
            row = {"model": model, "grammar": lit.get(g.vocab.iloc[0], "").removeprefix("start: ")}
            for smp in ("upstream", "fixed"):
                x = g[g.sampler == smp]
                said = "" if x.empty else (f"{x.outcome.iloc[0]}: {show_text(x.output.iloc[0][:60])} (HTTP {x.http_status.iloc[0]}, "
                                           f"stop {x.stop_type.iloc[0]})")
                row[smp] = Cell(said, shows("violation" in said))
            sp_rows.append(row)
        hit = [r["model"] for r in sp_rows if "violation" in r["fixed"].value]
        bug_c = {"hit": len(hit), "n": len(sp_rows)}
        sec.views.append(Table(pd.DataFrame(sp_rows), caption=f"Bug C through the server: a literal spelling a special token (llguidance {pinned})"))
    # the candidate patches through the server: every case where one answers otherwise than the PR
    cands_said: dict[str, Any] | None = None
    cands = [c for c in ("nospecial", "failclosed") if (df.sampler == c).any()]
    if cands:
        crow = []
        for (model, case), g in df[(df.llguidance == pinned) & df.sampler.isin(["fixed", *cands])].groupby(["model", "case"], sort=False):
            got = {x.sampler: x for x in g.itertuples()}
            if "fixed" not in got or all(c not in got or got[c].outcome == got["fixed"].outcome for c in cands):
                continue
            crow.append({"model": model, "case": case, **{smp: f"{got[smp].outcome}: {show_text(got[smp].output[:50])}"
                                                         for smp in ("fixed", *cands) if smp in got}})
        n_cand = int(df.sampler.isin(cands).sum())
        cands_said = {"names": cands, "requests": n_cand, "differ": len(crow)}
        if crow:
            sec.views.append(Table(pd.DataFrame(crow), caption="Where a candidate patch's server answers otherwise than the PR's"))
    if vdiff:
        sec.views.append(Table(pd.DataFrame(vdiff), caption="Cells that differ between the llguidance versions"))
    if n_diff:
        sec.views.append(Table(dd[~dd.same].reset_index(drop=True), caption="Cells where the port's matrix and the server differ"))
    sec.claim, sec.text = prose(
        "server", patches=res.patches_link, versions=versions_run, pinned_llg=LLG_PINNED, silent=len(silent_up), failing=len(quotes),
        fixed_bad=len(fixed_bad), agree=n_cells - n_diff, n_cells=n_cells, vdiff=bool(vdiff), ignored=ignored_summary(df, pinned),
        under_load=under_load, load_on_gbnf=load_on_gbnf, load=load_said, bug_c=bug_c, cands=cands_said, pinned_run=pinned)
    sec.raw_table("server", df)
    if not load.empty:
        sec.raw_table("server_load", load)
    if len(dd):
        sec.raw_table("server_vs_port", dd)
    return sec
