"""Server level (guide 8): the real llama-server, both builds, every case and control."""

from __future__ import annotations

from typing import Any

import pandas as pd

from .. import guide, server
from ..candidates import NAMES as CANDIDATES
from ..llama_server import LLG_PINNED
from ..native import version_key
from ..show import show_text
from .data import Results, takes_results
from .prose import blocks
from .table import Cell, Section, Table, after_fix, group_rows, int_columns, matched, shows

SERVER_CONTROLS = ("json_enum_gbnf", "json_enum_chat", "rejected_schema", "special_literal", "special_pattern")


def server_frame(ok: list[dict[str, Any]]) -> pd.DataFrame:
    df = pd.DataFrame([row for r in ok for row in r["rows"]])
    order = {
        c: i for i, c in enumerate(("forced_literal", "json_enum", "half_free", "dots", "no_space", *SERVER_CONTROLS))
    }
    df["_c"] = df["case"].map(lambda c: order.get(c, 99))
    df = (
        df.sort_values(
            ["synthetic", "model", "llguidance", "sampler", "_c"],
            ascending=[False, True, True, False, True],
            kind="stable",
        )
        .drop(columns="_c")
        .reset_index(drop=True)
    )
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
    return f"ignored on {len(ign)} of {len(x)} requests (HTTP 200, no error field, unconstrained text)" + (
        ", on both builds" if set(ign.sampler) >= {"upstream", "fixed"} else ""
    )


def _guide_cell(text: str) -> tuple[int | None, int | None]:
    """A cell of the guide's server table as (cases passed, llg errors): "0/3, 3 llg errors" ->
    (0, 3); "0/3 (silent)" and "3/3" give no count (None)."""
    passed = int(text.split("/")[0]) if "/" in text else None
    count = next(
        (
            int(w)
            for w, nxt in zip(text.replace(",", "").split(), text.replace(",", "").split()[1:])
            if w.isdigit() and nxt in ("llg", "errors")
        ),
        None,
    )
    return passed, count


def _stands_in(res: Results, vocab: str, synthetic: bool) -> list[str]:
    """The guide's models a server row stands in for: the fixture of `guide.SERVER_STAND_IN`, and,
    for a real model, any guide row of its tokenizer's kind (a SentencePiece vocab that prepends a
    space stands in for the guide's llama/SPM models), so a new real-weight input needs no name here."""
    out = [m for m, (fx, _) in guide.SERVER_STAND_IN.items() if fx == vocab]
    if not synthetic and not out:
        census = {r["vocab"]: r["summary"] for r in res.load("census")[0]}
        s = census.get(vocab, {})
        if s.get("vocab_type") == "SPM" and s.get("add_space_prefix_observed"):
            out = [m for m, (tok, *_r) in guide.SERVER.items() if tok.endswith("/SPM")]
    return out


def guide_server_rows(res: Results) -> list[dict[str, Any]]:
    """Guide 8's server table against ours: per guide row and each model of the suite that stands
    in for it, both sides' cases passed without and with the fix, the llg error count where the
    guide gives one, greedy, a match mark and why they differ."""
    ok, _ = res.load("server")
    if not ok:
        return []
    df = server_frame(ok)
    versions_run = sorted({v for r in ok for v in r["llguidance"]}, key=version_key)
    pinned = LLG_PINNED if LLG_PINNED in versions_run else versions_run[0]
    main = df[df.case.isin(guide.SERVER_CASES) & (df.llguidance == pinned)]
    out = []
    for model, g in main.groupby("model", sort=False):
        up, fx = g[g.sampler == "upstream"], g[g.sampler == "fixed"]
        synthetic = bool(g.synthetic.iloc[0])
        ours: dict[str, Any] = {
            "without": int((up.outcome == "pass").sum()),
            "with": int((fx.outcome == "pass").sum()),
            "n": len(up),
            "llg_without": int(up.llg_errors.sum()),
            "llg_with": int(fx.llg_errors.sum()),
            "greedy": bool(fx.greedy.any()),
            "per_case": {r.case: int(r.llg_errors) for r in up.itertuples()},
            "silent": bool(
                ((up.outcome != "pass") & (up.http_status == 200) & ~up.error_field.astype(bool)).sum()
                == (up.outcome != "pass").sum()
            ),
        }
        for gm in _stands_in(res, g.vocab.iloc[0], synthetic):
            tok, without, with_, greedy = guide.SERVER[gm]
            (gw, gl), (gf, _) = _guide_cell(without), _guide_cell(with_)
            same_cases = (gw, gf) == (ours["without"], ours["with"]) and (greedy == "yes") == ours["greedy"]
            why, short = [], ""
            if not same_cases:
                why.append(
                    f"cases passed: the guide {gw}/{gf}, here {ours['without']}/{ours['with']} (without / with the fix)"
                )
                short = "cases passed differ"
            if gl is not None and gl != ours["llg_without"]:
                cases = ", ".join(f"{c} {n}" for c, n in ours["per_case"].items())
                why.append(
                    f"the guide counted {gl} llg errors; here {ours['llg_without']} `llg error` log lines ({cases}): a "
                    f"grammar broken without the matcher dying (bug A's corrupted key) logs none; the guide's logs are "
                    f"unpublished, so its count cannot be checked"
                )
                short = (
                    short or f"{ours['llg_without']} llg errors here, {gl} in the guide (its count cannot be checked)"
                )
            elif gl is None and "silent" in without:
                why.append(
                    f'"silent" in the guide: nothing reaches the client; here {ours["llg_without"]} `llg '
                    f"error` log lines, "
                    "none in a response" + ("" if ours["silent"] else ", but some failures were loud")
                )
            mark = "✓" if same_cases and not short else "✗"
            out.append(
                {
                    "the guide's model": f"{gm} ({tok})",
                    "the guide: without / with (greedy)": f"{without} / {with_} ({greedy})",
                    "stand-in here": f"{model if synthetic else g.vocab.iloc[0]} "
                    f"({'synthetic' if synthetic else 'real'})",
                    "here: without / with (greedy)": f"{ours['without']}/{ours['n']}, {ours['llg_without']} "
                    f"llg errors / {ours['with']}/{ours['n']}, {ours['llg_with']} llg errors "
                    f"({'yes' if ours['greedy'] else 'no'})",
                    "match": mark,
                    "why": ("; ".join(why) + ".")
                    if why
                    else "the same cases pass, greedy the same (no llg error count in the guide).",
                    "why_short": short or "the same",
                    "guide": gm,
                    "stand_in": g.vocab.iloc[0],
                }
            )
    return out


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
                return Cell(
                    f"{text} (HTTP {r['http_status']}, {'an' if r['error_field'] else 'no'} error field)",
                    "ok" if r["grammar_kept"] else "bad",
                )

            rows.append(
                {
                    "case": case,
                    "bug": bug,
                    "the guide (TinyLlama-1.1B, without fix)": theirs,
                    f"{q['input']}, without fix": said(up),
                    "with fix": said(fx),
                    "llg error in the server's log (without fix)": up.get("llg_error", ""),
                }
            )
    if not rows:
        return None
    return Table(
        pd.DataFrame(rows),
        caption=f"The guide's quotes, and the same cases on real weights (llama-server's `content`, "
        f"llguidance {snap['inputs'][0].get('llguidance', '')})",
        note=(
            f"From the dated snapshot `make quotes` (and `make bench`) wrote on {snap.get('date')}, on a "
            f"{snap.get('cpu')} (reports/bench-real-quotes.json), not from this report's results: a real model's words "
            f"depend on the CPU (the venv's ggml is built -march=native, so at temperature 0 a near-tie can break "
            f"another way on another machine of the same kind), and every committed table must regenerate byte for "
            f"byte. What the grammar decides, the outcome, is the report's own, in the tables above."
        ),
    )


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
        stands = _stands_in(res, g.vocab.iloc[0], kind == "synthetic")
        up_bad, fx_bad = bool((up.outcome != "pass").any()), bool((fx.outcome != "pass").any())
        rows.append(
            {
                "model": f"{model} ({kind})",
                "vocab": g.vocab.iloc[0],
                "stands in for": ", ".join(stands),
                "without fix": Cell(server_score(up), shows(up_bad)),
                "with fix": Cell(server_score(fx), after_fix(up_bad, fx_bad)),
                "greedy engaged": Cell("yes", "cost") if bool(fx.greedy.any()) else "no",
            }
        )
    for f in failed:
        rows.append(
            {
                "model": f["vocab"],
                "vocab": f["vocab"],
                "stands in for": "",
                "without fix": Cell(f"failed: {f.get('error', '')}", "bad"),
                "with fix": Cell("failed", "bad"),
                "greedy engaged": "",
            }
        )
    served_vocabs = set(df.vocab)
    # every case, both llguidance versions
    full = []
    for (model, llg), g in main.groupby(["model", "llguidance"], sort=False):
        full.append(
            {
                "model": model,
                "llguidance": llg,
                "without fix": server_score(g[g.sampler == "upstream"]),
                "with fix": server_score(g[g.sampler == "fixed"]),
            }
        )
    # the controls: GBNF from the same schema, and the chat endpoint's response_format
    ctrl = []
    for (model, case), g in df[
        df.case.isin(SERVER_CONTROLS)
        & ~df.case.isin(("special_literal", "special_pattern"))
        & (df.llguidance == pinned)
    ].groupby(["model", "case"], sort=False):
        ctrl.append(
            {
                "model": model,
                "case": case,
                **{
                    s: (
                        f"{x.outcome.iloc[0]} (HTTP {x.http_status.iloc[0]})"
                        + (f": {x.error.iloc[0]}" if x.error.iloc[0] else "")
                    )
                    for s, x in g.groupby("sampler", sort=False)
                },
            }
        )
    # llguidance 1.0.1 against the venv's: every cell whose outcome or output differs
    key = ["model", "sampler", "case"]
    by_v = {v: df[df.llguidance == v].set_index(key) for v in versions_run}
    vdiff = []
    if len(versions_run) == 2:
        a, b = (by_v[v] for v in versions_run)
        for k in a.index.intersection(b.index):
            ra, rb = a.loc[k], b.loc[k]
            if ra.outcome != rb.outcome or ra.output != rb.output or ra.llg_errors != rb.llg_errors:
                vdiff.append(
                    {
                        "model": k[0],
                        "sampler": k[1],
                        "case": k[2],
                        **{
                            f"llguidance {versions_run[0]}": f"{ra.outcome}: {show_text(ra.output[:80])}",
                            f"llguidance {versions_run[1]}": f"{rb.outcome}: {show_text(rb.output[:80])}",
                        },
                    }
                )
    # the port's matrix against the server, on the llguidance the port drives
    matrix_ok, _ = res.load("matrix")
    by_vocab = {r["vocab"]: r for r in matrix_ok}
    cells: list[dict[str, Any]] = []
    for r in ok:
        m = by_vocab.get(r["vocab"])
        if m is not None:
            cells += [c.row() for c in server.differential(m, r)]
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
    match = guide_server_rows(res)
    if match:
        sec.views.append(
            Table(
                pd.DataFrame(
                    [
                        {
                            **{
                                k: v
                                for k, v in m.items()
                                if k not in ("match", "why", "why_short", "guide", "stand_in")
                            },
                            "match": Cell(m["match"], matched(m["match"])),
                            "why": m["why"],
                        }
                        for m in match
                    ]
                ),
                caption=f"Guide 8's server table against this suite's (its three cases; llguidance {pinned})",
            )
        )
    quoted = quote_table(res.real_quotes, served_vocabs)
    if quoted is not None:
        sec.views.append(quoted)
    sec.views.append(
        Table(
            pd.DataFrame(rows),
            caption=f"Every model served here, the guide's three cases (llguidance {pinned})",
            note=blocks("server", only=("note",), quotes=list(quotes.itertuples()))["note"],
            collapsed=True,
        )
    )
    sec.views.append(
        Table(pd.DataFrame(full), caption="Every case (adds dots and no_space), per llguidance version", collapsed=True)
    )
    if ctrl:
        sec.views.append(
            Table(
                group_rows(pd.DataFrame(ctrl), key="model"),
                caption=f"Controls (llguidance {pinned}): GBNF from the same schema; the chat endpoint; "
                "a schema llguidance cannot compile",
                collapsed=True,
            )
        )
    load_said: dict[str, Any] | None = None
    if not load.empty:
        models = load.model.nunique()
        num = lambda col: pd.to_numeric(load[col], errors="coerce").fillna(0).astype(int)  # noqa: E731
        rounds = num("rounds") if "rounds" in load else pd.Series(1, index=load.index)
        fixed = load.sampler == "fixed"
        per_round = load.get("violations_per_round", pd.Series("", index=load.index)).astype(str)
        fixed_rounds = [
            sum(int(x.split()[k]) for x in per_round[fixed] if len(x.split()) > k) for k in range(int(rounds.max()))
        ]
        load_said = {
            "requests": int(load.requests.iloc[0]),
            "parallel": int(load.parallel.iloc[0]),
            "models": models,
            "builds": len(load) // models,
            "rounds": int(rounds.max()),
            "fixed_violations": int(num("violations")[fixed].sum()),
            "fixed_requests": int((rounds * num("requests"))[fixed].sum()),
            "fixed_spread": " ".join(map(str, fixed_rounds)) if len(set(fixed_rounds)) > 1 else "",
            "disagrees": int(num("judge_disagrees").sum()) if "judge_disagrees" in load else 0,
            "upstream_steady": all(len(set(x.split())) <= 1 for x in per_round[load.sampler == "upstream"]),
            "healthy": bool(load.healthy_after.astype(str).eq("True").all()),
        }
        sec.views.append(
            Table(
                load,
                collapsed=True,
                caption=f"Load: {load_said['rounds']} rounds of {load.requests.iloc[0]} constrained requests over "
                f"{load.parallel.iloc[0]} slots at once, every answer judged and compared with the server's content",
                note=f"Measured by `make bench` "
                f"({res.link(res.bench_csv.with_name('bench-server-load.md'), 'bench-server-load.md')}), not by `make "
                f"report`: how the server batches concurrent requests changes from run to run; this is that run's "
                f"snapshot.",
            )
        )
    said_words = df.content_match.astype(str) if "content_match" in df else pd.Series("", index=df.index)
    compared = df[said_words.str.startswith(("same", "differs"))]  # answers whose tokens the server returned
    content_said = (
        None
        if compared.empty
        else {
            "n": len(compared),
            "same": int(compared.content_match.astype(str).str.startswith("same").sum()),
            "differ": int(compared.content_match.astype(str).str.startswith("differs").sum()),
            "rules": ", ".join(sorted({c for c in compared.content_match.astype(str) if c.startswith("same")})),
        }
    )
    bug_c: dict[str, int] | None = None
    special = df[df.case.isin(["special_literal", "special_pattern"]) & (df.llguidance == pinned)]
    if not special.empty:
        # what was sent: the literal's grammar, or the pattern's schema (bug C by another road)
        sent = {
            (r["vocab"], c): (
                r.get("cases", {}).get(c, {}).get("grammar", "").removeprefix("start: ")
                if c == "special_literal"
                else "json_schema pattern "
                + str(r.get("cases", {}).get(c, {}).get("json_schema", {}).get("pattern", ""))
            )
            for r in ok
            for c in ("special_literal", "special_pattern")
        }
        sp_rows = []
        for (model, case), g in special.groupby(["model", "case"], sort=False):
            row = {"model": model, "grammar": sent.get((g.vocab.iloc[0], case), "")}
            for smp in ("upstream", "fixed"):
                x = g[g.sampler == smp]
                said = (
                    ""
                    if x.empty
                    else (
                        f"{x.outcome.iloc[0]}: {show_text(x.output.iloc[0][:60])} (HTTP {x.http_status.iloc[0]}, stop "
                        f"{x.stop_type.iloc[0]})"
                    )
                )
                row[smp] = Cell(said, shows("violation" in said))
            sp_rows.append(row)
        hit = sorted({r["model"] for r in sp_rows if "violation" in r["fixed"].value})
        pattern_hit = sorted(
            {r["model"] for r in sp_rows if "violation" in r["fixed"].value and "pattern" in r["grammar"]}
        )
        bug_c = {"hit": len(hit), "n": len({r["model"] for r in sp_rows}), "pattern_hit": len(pattern_hit)}
        sec.views.append(
            Table(
                pd.DataFrame(sp_rows),
                collapsed=True,
                caption=f"Bug C through the server: a literal, and a json_schema pattern, spelling a special "
                f"token (llguidance {pinned})",
            )
        )
    # the candidate patches through the server: every case where one answers otherwise than the PR
    cands_said: dict[str, Any] | None = None
    cands = [c for c in CANDIDATES if (df.sampler == c).any()]
    if cands:
        crow = []
        for (model, case), g in df[(df.llguidance == pinned) & df.sampler.isin(["fixed", *cands])].groupby(
            ["model", "case"], sort=False
        ):
            got = {x.sampler: x for x in g.itertuples()}
            if "fixed" not in got or all(c not in got or got[c].outcome == got["fixed"].outcome for c in cands):
                continue
            crow.append(
                {
                    "model": model,
                    "case": case,
                    **{
                        smp: f"{got[smp].outcome}: {show_text(got[smp].output[:50])}"
                        for smp in ("fixed", *cands)
                        if smp in got
                    },
                }
            )
        n_cand = int(df.sampler.isin(cands).sum())
        cands_said = {"names": cands, "requests": n_cand, "differ": len(crow)}
        if crow:
            sec.views.append(
                Table(
                    pd.DataFrame(crow),
                    caption="Where a candidate patch's server answers otherwise than the PR's",
                    collapsed=True,
                )
            )
    if vdiff:
        sec.views.append(
            Table(pd.DataFrame(vdiff), caption="Cells that differ between the llguidance versions", collapsed=True)
        )
    if n_diff:
        sec.views.append(
            Table(
                dd[~dd.same].reset_index(drop=True),
                caption="Cells where the port's matrix and the server differ",
                collapsed=True,
            )
        )
    told = blocks(
        "server",
        patches=res.patches_link,
        versions=versions_run,
        pinned_llg=LLG_PINNED,
        silent=len(silent_up),
        failing=len(quotes),
        fixed_bad=len(fixed_bad),
        agree=n_cells - n_diff,
        n_cells=n_cells,
        vdiff=bool(vdiff),
        ignored=ignored_summary(df, pinned),
        load=load_said,
        content=content_said,
        bug_c=bug_c,
        cands=cands_said,
        pinned_run=pinned,
        only=("claim", "text", "more"),
    )
    sec.claim, sec.text, sec.more = told["claim"], told["text"], told["more"]
    sec.raw_table("server", df)
    if not load.empty:
        sec.raw_table("server_load", load)
    if len(dd):
        sec.raw_table("server_vs_port", dd)
    return sec
