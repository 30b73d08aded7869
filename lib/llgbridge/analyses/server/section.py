"""Server level (guide 8): the real llama-server, both builds, every case and control."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from ... import cases as C
from ... import guide
from ...candidates import NAMES as CANDIDATE_NAMES
from ...catalogue import overridden
from ...report import gfm
from ...report.data import PageData, takes_page_data
from ...report.prose import blocks
from ...report.table import Cell, Section, Table, after_fix, clip, group_rows, int_columns, matched, shows
from ...show import show_text
from ..native.compute import version_key
from .judge import differential
from .llama_server import LLG_PINNED, MEMORY_HEADROOM, STARTUP_TIMEOUT

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
    builds = list(dict.fromkeys(x.sampler))
    return (
        f"ignored on {len(ign)} of {len(x)} requests on llguidance {llg} (HTTP 200, no error field, unconstrained "
        f"text), through {len(builds)} builds ({', '.join(builds)})"
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


def _stands_in(res: PageData, vocab: str, synthetic: bool) -> list[str]:
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


def _ours(g: pd.DataFrame) -> dict[str, Any]:
    """One model's guide cases here: passed without and with the fix, llg errors, greedy, the llg
    errors per case, and whether every failure without the fix was silent."""
    up, fx = g[g.sampler == "upstream"], g[g.sampler == "fixed"]
    return {
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


def _differ(gm: str, ours: dict[str, Any]) -> tuple[list[str], str, bool]:
    """Why guide row `gm` and ours differ (sentences, and a few words), and whether the same cases pass."""
    _, without, with_, greedy = guide.SERVER[gm]
    (gw, gl), (gf, _) = _guide_cell(without), _guide_cell(with_)
    same_cases = (gw, gf) == (ours["without"], ours["with"]) and (greedy == "yes") == ours["greedy"]
    why, short = [], ""
    if not same_cases:
        why.append(f"cases passed: the guide {gw}/{gf}, here {ours['without']}/{ours['with']} (without / with the fix)")
        short = "cases passed differ"
    if gl is not None and gl != ours["llg_without"]:
        cases = ", ".join(f"{c} {n}" for c, n in ours["per_case"].items())
        why.append(
            f"the guide counted {gl} llg errors; here {ours['llg_without']} `llg error` log lines ({cases}): a "
            f"grammar broken without the matcher dying (bug A's corrupted key) logs none; the guide's logs are "
            f"unpublished, so its count cannot be checked"
        )
        short = short or f"{ours['llg_without']} llg errors here, {gl} in the guide (its count cannot be checked)"
    elif gl is None and "silent" in without:
        why.append(
            f'"silent" in the guide: nothing reaches the client; here {ours["llg_without"]} `llg '
            f"error` log lines, "
            "none in a response" + ("" if ours["silent"] else ", but some failures were loud")
        )
    return why, short, same_cases


def guide_server_rows(res: PageData) -> list[dict[str, Any]]:
    """Guide 8's server table against ours: per guide row and each model of the suite that stands
    in for it, both sides' cases passed without and with the fix, the llg error count where the
    guide gives one, greedy, a match mark and why they differ."""
    ok, _ = res.load("server")
    if not ok:
        return []
    s = Served.of(ok, [])
    main = s.df[s.df.case.isin(guide.SERVER_CASES) & (s.df.llguidance == s.pinned)]
    out = []
    for model, g in main.groupby("model", sort=False):
        synthetic, ours = bool(g.synthetic.iloc[0]), _ours(g)
        for gm in _stands_in(res, g.vocab.iloc[0], synthetic):
            tok, without, with_, greedy = guide.SERVER[gm]
            why, short, same_cases = _differ(gm, ours)
            out.append(
                {
                    "the guide's model": f"{gm} ({tok})",
                    "the guide: without / with (greedy)": f"{without} / {with_} ({greedy})",
                    "stand-in here": f"{model if synthetic else g.vocab.iloc[0]} "
                    f"({'synthetic' if synthetic else 'real'})",
                    "here: without / with (greedy)": f"{ours['without']}/{ours['n']}, {ours['llg_without']} "
                    f"llg errors / {ours['with']}/{ours['n']}, {ours['llg_with']} llg errors "
                    f"({'yes' if ours['greedy'] else 'no'})",
                    "match": "✓" if same_cases and not short else "✗",
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


@dataclass
class Served:
    """The server results as one frame (`server_frame`), the llguidance versions run, and the one
    the tables lead with: the version llama.cpp pins, where it ran."""

    ok: list[dict[str, Any]]
    failed: list[dict[str, Any]]
    df: pd.DataFrame
    versions: list[str]
    pinned: str

    @classmethod
    def of(cls, ok: list[dict[str, Any]], failed: list[dict[str, Any]]) -> Served:
        versions = sorted({v for r in ok for v in r["llguidance"]}, key=version_key)
        return cls(ok, failed, server_frame(ok), versions, LLG_PINNED if LLG_PINNED in versions else versions[0])

    @property
    def main(self) -> pd.DataFrame:
        """Every case but the controls."""
        return self.df[~self.df.case.isin(SERVER_CONTROLS)]

    @property
    def failing(self) -> pd.DataFrame:
        """The cases that fail without the fix, on the pinned llguidance."""
        main = self.main
        return main[(main.sampler == "upstream") & (main.outcome != "pass") & (main.llguidance == self.pinned)]


def model_rows(res: PageData, s: Served) -> list[dict[str, Any]]:
    """Every model served, the guide's three cases on the build llama.cpp links (llguidance as it
    pins it), without and with the fix; then each input that failed."""
    guide3 = s.main[s.main.case.isin(guide.SERVER_CASES)]
    rows = []
    for model, g in guide3[guide3.llguidance == s.pinned].groupby("model", sort=False):
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
    for f in s.failed:
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
    return rows


def version_rows(s: Served) -> list[dict[str, Any]]:
    """Every case, per model and llguidance version, without and with the fix."""
    return [
        {
            "model": model,
            "llguidance": llg,
            "without fix": server_score(g[g.sampler == "upstream"]),
            "with fix": server_score(g[g.sampler == "fixed"]),
        }
        for (model, llg), g in s.main.groupby(["model", "llguidance"], sort=False)
    ]


def control_rows(s: Served) -> list[dict[str, Any]]:
    """The controls: GBNF from the same schema, the chat endpoint's response_format, the schema
    llguidance cannot compile (the special tokens are bug C's table)."""
    df = s.df
    ctrl = []
    for (model, case), g in df[
        df.case.isin(SERVER_CONTROLS)
        & ~df.case.isin(("special_literal", "special_pattern"))
        & (df.llguidance == s.pinned)
    ].groupby(["model", "case"], sort=False):
        ctrl.append(
            {
                "model": model,
                "case": case,
                **{
                    smp: (
                        f"{x.outcome.iloc[0]} (HTTP {x.http_status.iloc[0]})"
                        + (f": {x.error.iloc[0]}" if x.error.iloc[0] else "")
                    )
                    for smp, x in g.groupby("sampler", sort=False)
                },
            }
        )
    return ctrl


def version_diff_rows(s: Served) -> list[dict[str, Any]]:
    """llguidance 1.0.1 against the venv's: every cell whose outcome or output differs."""
    if len(s.versions) != 2:
        return []
    key = ["model", "sampler", "case"]
    a, b = (s.df[s.df.llguidance == v].set_index(key) for v in s.versions)
    vdiff = []
    for k in a.index.intersection(b.index):
        ra, rb = a.loc[k], b.loc[k]
        if ra.outcome != rb.outcome or ra.output != rb.output or ra.llg_errors != rb.llg_errors:
            vdiff.append(
                {
                    "model": k[0],
                    "sampler": k[1],
                    "case": k[2],
                    **{
                        f"llguidance {s.versions[0]}": f"{ra.outcome}: {clip(ra.output, 80)}",
                        f"llguidance {s.versions[1]}": f"{rb.outcome}: {clip(rb.output, 80)}",
                    },
                }
            )
    return vdiff


def port_differential(res: PageData, ok: list[dict[str, Any]]) -> pd.DataFrame:
    """The port's matrix against the server, on the llguidance the port drives: one row per cell."""
    matrix_ok, _ = res.load("matrix")
    by_vocab = {r["vocab"]: r for r in matrix_ok}
    cells: list[dict[str, Any]] = []
    for r in ok:
        m = by_vocab.get(r["vocab"])
        if m is not None:
            cells += [c.row() for c in differential(m, r)]
    return pd.DataFrame(cells)


def served_load(res: PageData, s: Served) -> pd.DataFrame:
    """The load test: `make bench`'s snapshot (its outcomes vary from run to run), not the
    results', on the models served here (a what-if report serves others)."""
    load = res.server_load
    if not load.empty:
        load = load[load.model.isin(set(s.df.model))].reset_index(drop=True)
    return load


def load_facts(load: pd.DataFrame) -> dict[str, Any] | None:
    """What the prose says of the load test: its size, and the fixed build's violations per round."""
    if load.empty:
        return None
    models = load.model.nunique()

    def num(col: str) -> pd.Series:
        return pd.to_numeric(load[col], errors="coerce").fillna(0).astype(int)

    rounds = num("rounds") if "rounds" in load else pd.Series(1, index=load.index)
    fixed = load.sampler == "fixed"
    per_round = load.get("violations_per_round", pd.Series("", index=load.index)).astype(str)
    fixed_rounds = [
        sum(int(x.split()[k]) for x in per_round[fixed] if len(x.split()) > k) for k in range(int(rounds.max()))
    ]
    return {
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


def content_facts(df: pd.DataFrame) -> dict[str, Any] | None:
    """Of the answers whose tokens the server returned, how many the server's content spells the same."""
    said_words = df.content_match.astype(str) if "content_match" in df else pd.Series("", index=df.index)
    compared = df[said_words.str.startswith(("same", "differs"))]
    if compared.empty:
        return None
    return {
        "n": len(compared),
        "same": int(compared.content_match.astype(str).str.startswith("same").sum()),
        "differ": int(compared.content_match.astype(str).str.startswith("differs").sum()),
        "rules": ", ".join(sorted({c for c in compared.content_match.astype(str) if c.startswith("same")})),
    }


def special_rows(s: Served) -> list[dict[str, Any]]:
    """Bug C through the server: per model and case, what was sent (the literal's grammar, or the
    pattern's schema: bug C by another road) and what each build answered."""
    df = s.df
    special = df[df.case.isin(["special_literal", "special_pattern"]) & (df.llguidance == s.pinned)]
    if special.empty:
        return []
    sent = {
        (r["vocab"], c): (
            r.get("cases", {}).get(c, {}).get("grammar", "").removeprefix("start: ")
            if c == "special_literal"
            else "json_schema pattern " + str(r.get("cases", {}).get(c, {}).get("json_schema", {}).get("pattern", ""))
        )
        for r in s.ok
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
                    f"{x.outcome.iloc[0]}: {clip(x.output.iloc[0], 60)} (HTTP {x.http_status.iloc[0]}, stop "
                    f"{x.stop_type.iloc[0]})"
                )
            )
            row[smp] = Cell(said, shows("violation" in said))
        sp_rows.append(row)
    return sp_rows


def bug_c_facts(sp_rows: list[dict[str, Any]]) -> dict[str, int] | None:
    """How many models bug C hits with the fix through the server, and through a pattern."""
    if not sp_rows:
        return None
    hit = sorted({r["model"] for r in sp_rows if "violation" in r["fixed"].value})
    pattern_hit = sorted({r["model"] for r in sp_rows if "violation" in r["fixed"].value and "pattern" in r["grammar"]})
    return {"hit": len(hit), "n": len({r["model"] for r in sp_rows}), "pattern_hit": len(pattern_hit)}


def candidate_rows(s: Served) -> tuple[list[str], list[dict[str, Any]]]:
    """The candidate patches served, and every case where one answers otherwise than the PR."""
    df = s.df
    cands = [c for c in CANDIDATE_NAMES if (df.sampler == c).any()]
    crow: list[dict[str, Any]] = []
    if not cands:
        return cands, crow
    for (model, case), g in df[(df.llguidance == s.pinned) & df.sampler.isin(["fixed", *cands])].groupby(
        ["model", "case"], sort=False
    ):
        got = {x.sampler: x for x in g.itertuples()}
        if "fixed" not in got or all(c not in got or got[c].outcome == got["fixed"].outcome for c in cands):
            continue
        crow.append(
            {
                "model": model,
                "case": case,
                **{smp: f"{got[smp].outcome}: {clip(got[smp].output, 50)}" for smp in ("fixed", *cands) if smp in got},
            }
        )
    return cands, crow


def match_table(match: list[dict[str, Any]], pinned: str) -> Table:
    """`guide_server_rows` as the page shows it, its match mark coloured."""
    hidden = ("match", "why", "why_short", "guide", "stand_in")
    return Table(
        pd.DataFrame(
            [
                {
                    **{k: v for k, v in m.items() if k not in hidden},
                    "match": Cell(m["match"], matched(m["match"])),
                    "why": m["why"],
                }
                for m in match
            ]
        ),
        caption=f"Guide 8's server table against this suite's (its three cases; llguidance {pinned})",
    )


def guide_views(res: PageData, s: Served) -> list[Table]:
    """The guide's table against ours, its quotes on real weights, every model on its three
    cases, every case per version, the controls."""
    views = []
    match = guide_server_rows(res)
    if match:
        views.append(match_table(match, s.pinned))
    quoted = quote_table(res.real_quotes, set(s.df.vocab))
    if quoted is not None:
        views.append(quoted)
    views.append(
        Table(
            pd.DataFrame(model_rows(res, s)),
            caption=f"Every model served here, the guide's three cases (llguidance {s.pinned})",
            note=blocks("server", only=("note",), quotes=list(s.failing.itertuples()))["note"],
            collapsed=True,
        )
    )
    views.append(
        Table(
            pd.DataFrame(version_rows(s)),
            caption="Every case (adds dots and no_space), per llguidance version",
            collapsed=True,
        )
    )
    ctrl = control_rows(s)
    if ctrl:
        views.append(
            Table(
                group_rows(pd.DataFrame(ctrl), key="model"),
                caption=f"Controls (llguidance {s.pinned}): GBNF from the same schema; the chat endpoint; "
                "a schema llguidance cannot compile",
                collapsed=True,
            )
        )
    return views


def load_table(res: PageData, load: pd.DataFrame, said: dict[str, Any]) -> Table:
    return Table(
        load,
        collapsed=True,
        caption=f"Load: {said['rounds']} rounds of {load.requests.iloc[0]} constrained requests over "
        f"{load.parallel.iloc[0]} slots at once, every answer judged and compared with the server's content",
        note=f"Measured by `make bench` "
        f"({res.link(res.bench_csv.with_name('bench-server-load.md'), 'bench-server-load.md')}), not by `make "
        f"report`: how the server batches concurrent requests changes from run to run; this is that run's "
        f"snapshot.",
    )


@dataclass
class Findings:
    """What the server section finds beyond the guide's table, each as rows and what the prose says of it."""

    load: pd.DataFrame
    load_said: dict[str, Any] | None
    special: list[dict[str, Any]]
    cands: list[str]
    cand_rows: list[dict[str, Any]]
    vdiff: list[dict[str, Any]]
    dd: pd.DataFrame

    @classmethod
    def of(cls, res: PageData, s: Served) -> Findings:
        load = served_load(res, s)
        return cls(
            load,
            load_facts(load),
            special_rows(s),
            *candidate_rows(s),
            version_diff_rows(s),
            port_differential(res, s.ok),
        )

    @property
    def n_diff(self) -> int:
        return int((~self.dd.same).sum()) if len(self.dd) else 0


def finding_views(res: PageData, s: Served, f: Findings) -> list[Table]:
    """The load test, bug C, the candidates, the versions' and the port's differences."""
    views = []
    if f.load_said is not None:
        views.append(load_table(res, f.load, f.load_said))
    if f.special:
        caption = (
            "Bug C through the server: a literal, and a json_schema pattern, spelling a special "
            f"token (llguidance {s.pinned})"
        )
        views.append(Table(pd.DataFrame(f.special), collapsed=True, caption=caption))
    if f.cand_rows:
        caption = "Where a candidate patch's server answers otherwise than the PR's"
        views.append(Table(pd.DataFrame(f.cand_rows), caption=caption, collapsed=True))
    if f.vdiff:
        views.append(
            Table(pd.DataFrame(f.vdiff), caption="Cells that differ between the llguidance versions", collapsed=True)
        )
    if f.n_diff:
        caption = "Cells where the port's matrix and the server differ"
        views.append(Table(f.dd[~f.dd.same].reset_index(drop=True), caption=caption, collapsed=True))
    return views


def settings_said(ok: list[dict[str, Any]]) -> str:
    """How the requests were sampled, as the results record it (issue 48, break 14): "temperature 0
    with seed 0, at most 64 tokens", or each setting with its models where they differ."""

    def one(r: dict[str, Any]) -> str:
        limit = f", at most {r['max_tokens']} tokens" if isinstance(r.get("max_tokens"), int) else ""
        return f"temperature {float(r['temperature']):g} with seed {r['seed']}{limit}"

    said: dict[str, list[str]] = {}
    for r in ok:
        said.setdefault(one(r), []).append(str(r.get("model") or r["vocab"]))
    if len(said) == 1:
        return next(iter(said))
    return "; ".join(f"{k} ({', '.join(sorted(models))})" for k, models in sorted(said.items()))


def server_prose(res: PageData, s: Served, f: Findings) -> dict[str, str]:
    main, quotes = s.main, s.failing
    # the PR's cases only, the stand-ins apart: the verdict and the PR comment count by this rule
    pr = quotes[quotes.case.isin(list(C.CASES))]
    stand = pr[pr.vocab.isin(list(overridden()))]
    shipped = pr[~pr.vocab.isin(list(overridden()))]

    def silent(x: pd.DataFrame) -> int:
        return len(x[(x.http_status == 200) & ~x.error_field.astype(bool)])

    cands_said = (
        {"names": f.cands, "requests": int(s.df.sampler.isin(f.cands).sum()), "differ": len(f.cand_rows)}
        if f.cands
        else None
    )
    return blocks(
        "server",
        patches=res.patches_link,
        versions=s.versions,
        pinned_llg=LLG_PINNED,
        silent=silent(shipped),
        failing=len(shipped),
        stand_silent=silent(stand),
        stand_failing=len(stand),
        fixed_bad=len(main[(main.sampler == "fixed") & (main.outcome == "violation")]),
        agree=len(f.dd) - f.n_diff,
        n_cells=len(f.dd),
        vdiff=bool(f.vdiff),
        ignored=ignored_summary(s.df, s.pinned),
        load=f.load_said,
        content=content_facts(s.df),
        bug_c=bug_c_facts(f.special),
        cands=cands_said,
        pinned_run=s.pinned,
        settings=settings_said(s.ok),
        headroom=MEMORY_HEADROOM >> 30,
        start_timeout=f"{STARTUP_TIMEOUT:.0f}",
        only=("claim", "text", "more"),
    )


TITLE = "Server level: the real llama-server (guide 8)"


def unmade_section(failed: list[dict[str, Any]]) -> Section:
    """The section when no input's server result could be made: each input's cause, never a
    sentence about requests (no server answering once read as "no request broke its grammar")."""
    sec = Section("server", TITLE, notebook="server")
    causes = "; ".join(f"{gfm.inline(f.get('vocab', ''))}: {gfm.inline(f.get('error', ''))}" for f in failed)
    sec.text = f"**The server part could not be made**, so nothing here says how a server answered: {causes}"
    return sec


@takes_page_data
def server_section(res: PageData) -> Section | None:
    ok, failed = res.load("server")
    if not ok:
        return unmade_section(failed) if failed else None
    s = Served.of(ok, failed)
    f = Findings.of(res, s)
    sec = Section("server", TITLE, notebook="server")
    sec.views += guide_views(res, s) + finding_views(res, s, f)
    told = server_prose(res, s, f)
    sec.claim, sec.text, sec.more = told["claim"], told["text"], told["more"]
    sec.raw_table("server", s.df)
    if not f.load.empty:
        sec.raw_table("server_load", f.load)
    if len(f.dd):
        sec.raw_table("server_vs_port", f.dd)
    return sec
