"""Beyond the PR: special-token text (bug C), a limit that drops the grammar (bug D), candidate patches."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..analyses.native.compute import LLG_PINNED as NATIVE_PIN
from ..analyses.native.compute import version_key
from ..candidates import CANDIDATES
from ..show import show_text
from ..soundness import bug_d_frame
from .data import PageData, takes_page_data
from .prose import blocks
from .table import REPAIRED, Cell, Section, Table, first_words, guide_order, names, shows

CANDIDATE_NOTES = {c.name: c.what for c in CANDIDATES}


def special_cell(x: pd.Series) -> str:
    """How one sampler's walk of bug C's literal went on one vocab."""
    if bool(x.get("complete")):
        return "spelled"
    if not x.get("error"):
        return f"stops at {show_text(str(x.get('spelled', '')))}: allows {x.get('stop_allowed_pieces', '')}"
    return f"error: {x.get('error')}"


def special_rows(special: pd.DataFrame) -> list[dict[str, Any]]:
    """One row per vocab (in the guide's order): its literal and each sampler's walk of it."""
    piv: dict[str, dict[str, Any]] = {}
    for (v, smp), g in special.groupby(["vocab", "sampler"], sort=False):
        x = g.iloc[0]
        piv.setdefault(v, {"vocab": v, "literal": x.get("literal", "")})[smp] = special_cell(x)
    return [piv[v] for v in guide_order(list(piv))]


def spelled_summary(rows: list[dict[str, Any]], cols: list[str]) -> pd.DataFrame:
    """Per sampler, on how many vocabs it spells bug C's literal out, and where it stops early."""
    summary = []
    for col in cols:
        stops = [r["vocab"] for r in rows if not str(r.get(col, "")).startswith("spelled")]
        summary.append(
            {
                "sampler": col,
                "spells the literal out on": f"{len(rows) - len(stops)} of {len(rows)}",
                "stops early on": Cell(names(stops), shows(stops)),
            }
        )
    return pd.DataFrame(summary)


def bug_c(special: pd.DataFrame, sec: Section) -> dict[str, Any]:
    """Bug C, special-token text: a literal spelling the end-of-turn token, walked per sampler.
    Its two tables go on `sec`; what the fragment says of it is returned."""
    rows = special_rows(special)
    df = pd.DataFrame(rows)
    cols = [c for c in ("upstream", "fixed", *CANDIDATE_NOTES) if c in df]
    walks = df[["vocab", "literal", *cols]].assign(
        **{c: [Cell(x, shows(not str(x).startswith("spelled"))) for x in df[c]] for c in cols}
    )
    hit = [r["vocab"] for r in rows if not str(r.get("fixed", "")).startswith("spelled")]
    fixed_by = [r["vocab"] for r in rows if r["vocab"] in hit and str(r.get("nospecial", "")).startswith("spelled")]
    by_vocab = {r["vocab"]: r for r in rows}
    same = [v for v in hit if by_vocab[v].get("upstream") == by_vocab[v].get("fixed")]
    sec.views.append(
        Table(
            spelled_summary(rows, cols),
            caption="Bug C, compiled: a literal spelling the end-of-turn token as text, per sampler",
            collapsed=True,
        )
    )
    sec.views.append(Table(walks, caption="Bug C per vocab: where the walk of the literal stops", collapsed=True))
    sec.raw_table("beyond_special", special)
    return {
        "llguidance": special.llguidance.iloc[0],
        "hit": hit,
        "n": len(rows),
        "fixed_by": fixed_by,
        "same": len(same),
    }


def pr_test_cell(g: pd.DataFrame, sampler: str) -> str:
    """A candidate's run of the PR's test on one vocab (`g`: that vocab's runs by sampler)."""
    failure = g.loc[sampler, "failure"]
    return f"exit {g.loc[sampler, 'exit_code']}" + (f": {first_words(failure)}" if failure else "")


def limit_rows(pr: pd.DataFrame) -> list[dict[str, Any]]:
    """Per vocab where the PR's sampler hits llguidance's item limit in the PR's test: its error,
    and each candidate's run of the same test."""
    limit = pr[(pr.sampler == "fixed") & pr.llg_error.str.contains("Too many items", na=False)]
    drows = []
    for v in guide_order(list(limit.vocab.unique())):
        g = pr[pr.vocab == v].set_index("sampler")
        drows.append(
            {
                "vocab": v,
                "the PR's sampler": f"exit {g.loc['fixed', 'exit_code']}: {first_words(g.loc['fixed', 'llg_error'])}",
                **{c: pr_test_cell(g, c) for c in CANDIDATE_NOTES if c in g.index},
            }
        )
    return drows


def candidates_pr_test(pr: pd.DataFrame) -> pd.DataFrame:
    """Per sampler (the PR's and each candidate), on how many vocabs the PR's test passes."""
    cand = pr[pr.sampler.isin(["fixed", *CANDIDATE_NOTES])]
    summary = [
        {
            "sampler": smp,
            "what it is": CANDIDATE_NOTES.get(smp, "the PR"),
            "PR test passes on": f"{int((g.exit_code == 0).sum())} of {len(g)} vocabs",
            "aborts on": names(sorted(g[g.exit_code != 0].vocab)),
        }
        for smp, g in cand.groupby("sampler", sort=False)
    ]
    return pd.DataFrame(summary)


def bug_d(native_ok: list[dict[str, Any]], sec: Section) -> list[str] | None:
    """Bug D: the PR's own test hitting llguidance's item limit, and what failing closed changes.
    Its tables go on `sec`; the vocabs that hit the limit are returned (None: no PR test ran)."""
    pr = pd.DataFrame(
        [{**t, "vocab": r["vocab"]} for r in native_ok for t in r.get("tests", []) if t.get("test") == "pr"]
    )
    if pr.empty:
        return None
    pin = NATIVE_PIN if (pr.llguidance == NATIVE_PIN).any() else sorted(pr.llguidance.unique(), key=version_key)[-1]
    pr = pr[pr.llguidance == pin]
    drows = limit_rows(pr)
    if drows:
        sec.views.append(
            Table(
                pd.DataFrame(drows),
                caption=f"Bug D: llama.cpp's own test where a mask exceeds the item limit (llguidance {pin})",
                collapsed=True,
            )
        )
    summary = candidates_pr_test(pr)
    if not summary.empty:
        sec.views.append(Table(summary, caption="The PR's own test on each candidate, every vocab", collapsed=True))
    return [r["vocab"] for r in drows]


@takes_page_data
def beyond_section(res: PageData) -> Section | None:
    """The two ways the fixed bridge still drops or bends a grammar, and the candidate patches."""
    native_ok, _ = res.load("native")
    server_ok, _ = res.load("server")
    special = pd.DataFrame([row for r in native_ok for row in r.get("special", [])])
    side = candidates_side_by_side(res)
    if special.empty and not server_ok and side is None:
        return None
    sec = Section(
        "beyond", "Beyond the PR: special-token text (bug C), a limit that drops the grammar (bug D), candidate patches"
    )
    c = bug_c(special, sec) if not special.empty else None
    d = bug_d(native_ok, sec)
    if side is not None:
        side.collapsed = True
        sec.views.append(side)
    everywhere = bug_d_everywhere(res, sec)
    candidates = pd.DataFrame([row for r in native_ok for row in r.get("candidates", [])])
    if not candidates.empty:
        sec.raw_table("native_candidates", candidates)
    refused = server_errors(server_ok, sec)
    docs = {"native": res.doc_link("native.md"), "server": res.doc_link("server.md")}
    said = blocks("beyond", c=c, d=d, everywhere=everywhere, patches=res.patches_link, refused=refused, docs=docs)
    sec.claim, sec.text, sec.more = said["claim"], said["text"], said.get("more", "")
    return sec


def candidate_cell(g: pd.DataFrame, b: str) -> Any:
    """Bridge `b`'s exactness and forcing on one vocab (`g`: that vocab's bridges), marked where
    it differs from the PR's: better or as exact (repaired), worse (bad)."""
    if b not in g.index:
        return ""
    x = g.loc[b]
    if not bool(x.built):
        return Cell(f"not built: {first_words(x.build_error, 40)}", "bad")
    said = f"{100 * float(x.tokenize_exact_rate):.1f}% exact, " + ("forcing" if bool(x.forcing) else "greedy")
    base = g.loc["fixed"] if "fixed" in g.index else None
    changed = base is not None and (x.tokenize_exact_rate != base.tokenize_exact_rate or x.forcing != base.forcing)
    return Cell(
        said,
        REPAIRED
        if changed and base is not None and float(x.tokenize_exact_rate) >= float(base.tokenize_exact_rate)
        else ("bad" if changed else ""),
    )


def candidates_side_by_side(res: PageData) -> Table | None:
    """Per vocab, what each candidate changes beside the PR in the port: `tokenize_fn`'s exactness
    (the exactness analysis's inputs) and whether byte forcing is kept (the PR's probes, and
    nospecial's fourth)."""
    ok, _ = res.load("exactness")
    built = pd.DataFrame([b for r in ok for b in r.get("bridges", [])])
    if built.empty or not set(CANDIDATE_NOTES) & set(built.bridge):
        return None
    rows = []
    for v in guide_order(sorted(set(built.vocab))):
        g = built[built.vocab == v].set_index("bridge")
        rows.append(
            {
                "vocab": v,
                "fixed (the PR)": candidate_cell(g, "fixed"),
                **{c: candidate_cell(g, c) for c in CANDIDATE_NOTES},
            }
        )
    return Table(
        pd.DataFrame(rows),
        caption="The candidates beside the PR in the port: tokenize_fn's exactness on the exactness "
        "inputs, and whether byte forcing is kept",
    )


# the walks bug D is searched along: (label, the analysis whose results record their mask errors)
BUG_D_SOURCES = {"soundness battery": "soundness", "corpus sample": "corpus", "compiled harness": "native"}


def mask_errors(res: PageData) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Every llguidance error mid-walk, labelled with the walk it came from, and per walk how many
    results recorded their errors (a result from before mask errors were kept has none)."""
    rows, searched = [], {}
    for label, analysis in BUG_D_SOURCES.items():
        ok, _ = res.load(analysis)
        with_field = [r for r in ok if "mask_errors" in r]
        searched[label] = len(with_field)
        rows += [{**e, "where": label} for r in with_field for e in r["mask_errors"]]
    return rows, searched


def llguidance_versions(x: pd.Series) -> str:
    return ", ".join(sorted({str(v) for v in x if str(v) not in ("", "nan")}, key=version_key))


def merge_versions(limits: pd.DataFrame) -> pd.DataFrame:
    """One row per (vocab, bridge, where it stopped): the llguidance versions that agree on it
    side by side (1.0.1 does not dump its item count; the venv's does)."""
    keys = ["where", "vocab", "bridge", "grammar", "step", "error", "limit", "then", "then_allowed"]
    limits = limits.assign(**({} if "llguidance" in limits else {"llguidance": ""}))
    return (
        limits.groupby(keys, sort=False, dropna=False)
        .agg(
            llguidance=("llguidance", llguidance_versions),
            items=("items", "max"),
            over_limit=("over_limit", "max"),
        )
        .reset_index()
    )


def limits_shown(limits: pd.DataFrame) -> pd.DataFrame:
    """The merged limit rows as the table shows them: how far the mask went, what came after."""
    shown = limits.assign(
        **{
            "mask went to": [
                f"{int(i)} items ({int(o)} over {int(lim)})" if pd.notna(i) else f"over {int(lim)}"
                for i, o, lim in zip(limits["items"], limits["over_limit"], limits["limit"])
            ],
            "then": [
                f"{t}: {int(n)} tokens allowed" if pd.notna(n) else t
                for t, n in zip(limits["then"], limits["then_allowed"])
            ],
        }
    )
    cols = [
        "where",
        "vocab",
        "bridge",
        *([c for c in ("llguidance",) if c in shown]),
        "grammar",
        "step",
        "error",
        "mask went to",
        "then",
    ]
    shown = shown.assign(vocab=pd.Categorical(shown.vocab, guide_order(sorted(set(shown.vocab))), ordered=True))
    shown = shown.sort_values(["where", "vocab", "bridge"], kind="stable")[cols].astype({"vocab": str})
    return shown.reset_index(drop=True)


def error_cause(r: Any) -> str:
    """Why a walk stopped on an error that is not a resource limit."""
    if "panic" in str(r.error):
        return f"llguidance {r.get('llguidance', '')} panicking on {r.vocab}".replace("  ", " ")
    return (
        "upstream's matcher dead after bug B" if r.bridge == "upstream" else f"{r.bridge}: {first_words(r.error, 40)}"
    )


def other_causes(others: pd.DataFrame) -> str:
    """The errors that are not bug D, counted per cause, the most frequent first."""
    causes = others.apply(error_cause, axis=1).value_counts() if not others.empty else pd.Series(dtype=int)
    return "; ".join(f"{n} {c}" for c, n in sorted(causes.items(), key=lambda x: (-x[1], x[0])))


def failclosed_example(limits: pd.DataFrame) -> dict[str, Any] | None:
    """The first vocab (in the guide's order) where both the PR's bridge and failclosed hit the
    limit: how many tokens each allows after it."""
    fc, fx = limits[limits.bridge == "failclosed"], limits[limits.bridge == "fixed"]
    both = [v for v in guide_order(sorted(set(limits.vocab))) if v in set(fc.vocab) & set(fx.vocab)]
    if not both:
        return None
    v = both[0]
    return {
        "vocab": v,
        "failclosed": int(fc[fc.vocab == v].then_allowed.iloc[0]),
        "fixed": int(fx[fx.vocab == v].then_allowed.iloc[0]),
    }


def bug_d_everywhere(res: PageData, sec: Section) -> dict[str, Any] | None:
    """Bug D searched for along every walk the suite makes: the soundness battery, the corpus
    sample and the compiled harness (llama.cpp's own test grammars); every llguidance error
    mid-walk is a row of `bug_d.csv`, the resource-limit ones (bug D) a row of the table shown."""
    rows, searched = mask_errors(res)
    if not any(searched.values()):
        return None
    every = bug_d_frame(rows, limits_only=False) if rows else pd.DataFrame()
    if not every.empty:
        sec.raw_table("bug_d", every)
    limits = every[every["limit"].notna()] if not every.empty else every
    hits = {
        label: sorted(set(limits[limits["where"] == label].vocab)) if not limits.empty else []
        for label in BUG_D_SOURCES
    }
    example = None
    if not limits.empty:
        limits = merge_versions(limits)
        sec.views.append(
            Table(
                limits_shown(limits),
                caption="Bug D, searched for along every walk: each mask that hit a resource limit",
                collapsed=True,
            )
        )
        example = failclosed_example(limits)
    others = every[every["limit"].isna()] if not every.empty else every
    return {
        "searched": searched,
        "hits": hits,
        "other": len(others),
        "example": example,
        "other_causes": other_causes(others),
    }


def server_errors(server_ok: list[dict[str, Any]], sec: Section) -> dict[str, Any] | None:
    """Every server error of the server runs (an HTTP 4xx/5xx, an `error` field, no answer), one
    row per (case, message, cause) with the vocabs and builds that gave it: the cause is
    `analyses.server.causes`' (a server row's `cause`), "cause not classified" where no rule applies."""
    rows = pd.DataFrame([row for r in server_ok for row in r.get("rows", [])])
    if rows.empty:
        return None
    rows = rows.assign(build=rows.sampler + "-" + rows.llguidance.astype(str))
    bad = rows[(rows.http_status != 200) | rows.error_field.astype(bool) | (rows.outcome == "no answer")]
    if bad.empty:
        return {"n": 0, "vocabs": [], "builds": 0, "chat": None}
    bad = bad.assign(
        cause=bad["cause"] if "cause" in bad else "not recorded: the run predates analyses.server.causes",
    )
    shown = (
        bad.groupby(["case", "http_status", "error", "cause"], sort=True)
        .agg(vocabs=("vocab", lambda x: names(guide_order(sorted(set(x))))), builds=("build", "nunique"))
        .reset_index()
    )
    sec.views.append(
        Table(shown, caption="Every server error, with its cause (analyses.server.causes)", collapsed=True)
    )
    chat = bad[bad["case"] == "json_enum_chat"]
    return {
        "n": len(bad),
        "vocabs": guide_order(sorted(set(bad.vocab))),
        "builds": int(bad.build.nunique()),
        "chat": {
            "vocabs": guide_order(sorted(set(chat.vocab))),
            "builds": int(chat.build.nunique()),
            "all_builds": int(rows.build.nunique()),
            "error": str(chat.error.iloc[0]),
            # each vocab's cause as analyses.server.causes read it from that run's own message and log
            "causes": {
                str(v): str(c) for v, c in chat.drop_duplicates("vocab")[["vocab", "cause"]].itertuples(index=False)
            },
        }
        if not chat.empty
        else None,
    }
