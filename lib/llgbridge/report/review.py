"""Guide 10, "what a reviewer should push on": its eight questions and the guide's one-measurement
claims (4.5, 5.2, 7.2, 9), each answered from the results."""

from __future__ import annotations

import json
import re
from typing import Any

import pandas as pd

from .. import upstream
from ..analyses.server.section import SERVER_CONTROLS
from ..show import show_text
from .data import PageData, takes_page_data
from .prose import blocks
from .table import Section, Table, guide_order, pinned_rows

GUIDE_10 = [  # (#, concern, the guide's answer in brief)
    (
        1,
        "Is greedy tokenization acceptable, or should SPM fail loudly?",
        "greedy keeps enforcement exact (section 6); a maintainer's call",
    ),
    (
        2,
        "Should SPM get a byte-exact tokenization entry point?",
        "better long-term; prefix-and-strip is unsafe in general (5.2)",
    ),
    (
        3,
        "Does the token_bytes change alter behaviour for BPE users?",
        "yes: it fixes 117 wrong tokens on llama-bpe; the \\xff branch is unchanged (4.5)",
    ),
    (4, "Is the probe robust?", "fails safe on every error path; tests the round trip (5.3)"),
    (5, "Why is a /regex/ needed in test_no_space_tokens?", "a literal is forced and never consults the trie (4.4)"),
    (6, "Why are the string tests skipped on SPM?", "they tokenize their own inputs (7.3)"),
    (7, "Conflict with PR #15837?", "likely textual; it keeps llama_detokenize, so it fixes neither bug"),
    (8, "Does CI cover this path?", "CI builds with LLAMA_LLGUIDANCE=ON but never tested an SPM vocab"),
]


NO_BYTES = re.compile(r"^<(\d+):(.*)>$", re.S)  # soundness.describe's label for a token with no real bytes


def sentinel_examples(soundness_ok: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One illegal (step, token) pair of the sentinel bridge per vocab where it has any, in real
    bytes: the walk's grammar and string, the step, the prefix before it, the token and why it
    is illegal there. From the stored worst steps, their first under-constrained token."""
    out = []
    order = guide_order([x["vocab"] for x in soundness_ok])
    for r in sorted(soundness_ok, key=lambda r: order.index(r["vocab"])):
        w = next((x for x in r.get("worst", []) if x.get("bridge") == "sentinel" and x.get("n_under")), None)
        if w is None:
            continue
        try:
            first = json.loads(w["under"])[0]
        except (ValueError, IndexError, TypeError):
            continue
        m = NO_BYTES.match(first)
        # `sample`, `prefix` and `text` are byte columns: stored text here, quoted by the table
        if m:
            token, text, real = m[1], m[2], "none: its piece is empty"
            why = (
                f"it spells nothing, so the mask from real pieces excludes it; the sentinel's table holds "
                f"{show_text(m[2])} for it, which the grammar admits after this prefix"
            )
        else:  # a token with real bytes: the label is its piece (no id stored)
            token, text, real = "(id not stored)", "", show_text(first)
            why = "the mask from real pieces excludes it here"
        out.append(
            {
                "vocab": r["vocab"],
                "grammar": w["grammar"],
                "sample": w["sample"],
                "step": w["step"],
                "prefix": w["prefix"],
                "token": token,
                "text": text,
                "real bytes": real,
                "why it is illegal": why,
                "pairs like it": f"{w['n_under']} at this step",
            }
        )
    return out


def probe_robustness(res: PageData) -> dict[str, Any] | None:
    """Question 4 from the exactness analysis: how many vocabs the PR's probe calls exact, and on
    which of those `tokenize_fn` is inexact on some input (only on special-token text, or not)."""
    ok, _ = res.load("exactness")
    pvx = [r["probe_vs_exactness"] for r in ok]
    if not pvx:
        return None
    misses = [x for x in pvx if str(x.get("cell", "")).startswith("probe misses")]
    return {
        "probe_exact": sum(1 for x in pvx if x.get("probe_exact")),
        "n_probed": len(pvx),
        "misses": sorted(x["vocab"] for x in misses),
        "specials": len([x for x in misses if x.get("inexact_only_specials")]),
    }


def xff_moved(census_ok: list[dict[str, Any]]) -> dict[str, Any]:
    """Guide 4.5 from the census: a token takes the \\xff branch where its first conversion call
    returns no bytes, so the two sets differ exactly at the differing tokens with one side empty."""
    branch = {r["vocab"]: [d for d in r["diffs"] if (d["piece"] == "") != (d["detok"] == "")] for r in census_ok}
    return {"moved": {v: d for v, d in sorted(branch.items()) if d}, "n": len(branch)}


def sentinel_cause(res: PageData) -> dict[str, Any] | None:
    """Question 2 / guide 5.2: what the sentinel bridge's illegal (step, token) pairs are. The
    soundness result keeps each bridge's worst steps with their illegal tokens (a token with no
    real bytes is labelled `<id:text>`); `table` is True when every stored one is such a token."""
    ok, _ = res.load("soundness")
    if not ok:
        return None
    total = sum(int(x.get("under") or 0) for r in ok for x in r["soundness"] if x["bridge"] == "sentinel")
    stored, labels = 0, []
    for r in ok:
        for w in r.get("worst", []):
            if w.get("bridge") == "sentinel" and w.get("n_under"):
                stored += int(w["n_under"])
                try:
                    labels += json.loads(w["under"])
                except (ValueError, TypeError):
                    labels.append("")
    return {
        "n": total,
        "stored": stored,
        "table": bool(labels) and all(NO_BYTES.match(x) for x in labels),
        "vocabs": sorted(
            {r["vocab"] for r in ok for x in r["soundness"] if x["bridge"] == "sentinel" and int(x.get("under") or 0)}
        ),
    }


SERIES = ("0001", "0002", "0003")  # the PR's patches, by number
REVIEWED = ("probe", "exactness", "soundness", "leak", "forced", "native", "server", "census")

# evidence is linked only where this report holds the section or table it names
EVIDENCE_SOURCE = {
    "#soundness": "soundness",
    "tables/soundness.csv": "soundness",
    "tables/census.csv": "census",
    "#leak": "leak",
    "tables/probe_vs_exactness.csv": "exactness",
    "#native": "native",
    "tables/forced.csv": "forced",
    "#code": "census",
}
# the evidence of each of guide 10's questions, in their order
GUIDE_10_EVIDENCE = [
    "#soundness",
    "tables/soundness.csv",
    "tables/census.csv",
    "tables/probe_vs_exactness.csv",
    "#leak",
    "#native",
    "#code",
    "#native",
]
# (guide's section, its claim, the fragment's block answering it, the evidence)
OTHER_CLAIMS = [
    ("7.2", "an assertion on cardinality alone passes on the buggy build", "c72", "tables/forced.csv"),
    ("9", 'llama.h\'s "Does not insert a leading space" (parse_special) is false', "c9", "tables/census.csv"),
    ("5.2", "prefix-and-strip tricks are not safe in general", "c52", "tables/soundness.csv"),
    ("4.5", "the same tokens take the \\xff special-token branch before and after the fix", "c45", "tables/census.csv"),
]

Loaded = dict[str, list[dict[str, Any]]]


def under_constrained(sound: pd.DataFrame, bridge: str, vocabs: list[str] | None = None) -> dict[str, Any]:
    """How many illegal (step, token) pairs `bridge` has in the soundness rows `sound` (on
    `vocabs` only, where given), and where: {"n", "where"}."""
    if sound.empty:
        return {"n": 0, "where": []}
    x = sound[(sound.bridge == bridge) & (pd.to_numeric(sound.under, errors="coerce").fillna(0) > 0)]
    if vocabs is not None:
        x = x[x.vocab.isin(vocabs)]
    return {"n": int(pd.to_numeric(x.under).sum()), "where": [f"{r.vocab} {int(r.under)}" for r in x.itertuples()]}


def fixed_failures(server_ok: list[dict[str, Any]]) -> tuple[bool, int]:
    """(whether anything was served, how many of the main cases the fixed sampler violated):
    the controls are left out, they are built to fail."""
    served = pd.DataFrame([row for r in server_ok for row in r["rows"]]) if server_ok else pd.DataFrame()
    if served.empty:
        return False, 0
    main_cases = served[~served.case.isin(SERVER_CONTROLS)]
    return True, int(((main_cases.sampler == "fixed") & (main_cases.outcome == "violation")).sum())


def cardinality(forced: dict[str, Any], census: dict[str, Any]) -> list[dict[str, Any]]:
    """Guide 7.2: on the two llama vocabs, upstream's allowed-token count at the forced step,
    and whether an assertion on that count alone (more than none, fewer than all) passes."""
    out = []
    for v in ("llama-bpe", "llama-spm"):
        up = forced.get(v, {}).get("upstream", {})
        n_tok = census.get(v, {}).get("n_tokens")
        if up and n_tok:
            n = int(up.get("allowed") or 0)
            out.append(
                {
                    "vocab": v,
                    "allowed": n,
                    "n_tokens": n_tok,
                    "passes": 0 < n < int(n_tok),
                    "not_prefix": up.get("not_prefix"),
                }
            )
    return out


def sentinel_exact(exactness_ok: list[dict[str, Any]], cause: dict[str, Any] | None) -> bool:
    """Where the sentinel's mask is wrong, is its tokenize_fn exact (the strip would show there)?"""
    rates = {
        b["vocab"]: b.get("tokenize_exact_rate")
        for r in exactness_ok
        for b in r.get("bridges", [])
        if b.get("bridge") == "sentinel"
    }
    return bool(cause and cause["vocabs"] and all(rates.get(v) == 1.0 for v in cause["vocabs"]))


def native_facts(native_ok: list[dict[str, Any]]) -> dict[str, Any]:
    """Questions 6 and 8 from the native runs: the shipped tests on llama-spm and the PR's test
    on llama-bpe, each before and after the fix."""
    nat = {r["vocab"]: {x["sampler"]: x for x in pinned_rows(r)} for r in native_ok}
    spm, bpe_nat = nat.get("llama-spm", {}), nat.get("llama-bpe", {})
    return {
        "spm": {
            "upstream_exit": spm.get("upstream", {}).get("shipped_test_exit", "?"),
            "fixed_exit": spm.get("fixed", {}).get("shipped_test_exit", "?"),
            "failure": spm.get("fixed", {}).get("shipped_test_failure", "") or "a string fails to match",
            "string_tests": spm.get("fixed", {}).get("string_tests", "?"),
        },
        "ci": {
            "upstream": bpe_nat.get("upstream", {}).get("pr_test_exit", "?"),
            "fixed": bpe_nat.get("fixed", {}).get("pr_test_exit", "?"),
        },
    }


def census_facts(census_ok: list[dict[str, Any]]) -> dict[str, Any]:
    """Questions 3 and 9 and guide 4.5 from the census: the BPE vocabs' differing tokens, the
    tokens that take the \\xff branch on one side only, the vocabs that insert a leading space."""
    census = {r["vocab"]: r["summary"] for r in census_ok}
    xff = xff_moved(census_ok)
    return {
        "bpe": {v: s["differing"] for v, s in census.items() if s.get("vocab_type") == "BPE" and s["differing"]},
        "bpe_llama": census.get("llama-bpe", {}).get("differing", "?"),
        "moved": xff["moved"],
        "n_census": xff["n"],
        "prefixed": sorted(v for v, x in census.items() if x.get("add_space_prefix_observed")),
    }


def later_commits(rec: dict[str, Any]) -> dict[str, Any]:
    """The commits on master after the bridge's first, and those of them that touch bug A's or B's code."""
    later = [c for c in rec["bridge_commits"] if not c["adds_file"]]
    return {
        "later": [f"#{c['pr']}" for c in later],
        "later_touching": [f"#{c['pr']}" for c in later if c["token_table"] or c["tokenize_fn"]],
        "applies_master": all(p["master"]["applies"] for k, p in rec["patches"].items() if k[:4] in SERIES),
    }


def review_facts(res: PageData, ok: Loaded, examples: list[dict[str, Any]]) -> dict[str, Any]:
    """Every value the review's fragment reads, from the loaded results `ok`."""
    greedy = sorted(r["vocab"] for r in ok["probe"] if r["probe"].get("greedy"))
    sound = (
        pd.DataFrame([row for r in ok["soundness"] for row in r["soundness"]]) if ok["soundness"] else pd.DataFrame()
    )
    served, fixed_fail = fixed_failures(ok["server"])
    census = {r["vocab"]: r["summary"] for r in ok["census"]}
    leak = {r["vocab"]: {x["bridge"]: x for x in r["rows"]} for r in ok["leak"]}
    forced = {r["vocab"]: {x["bridge"]: x for x in r["rows"]} for r in ok["forced"]}
    probe = probe_robustness(res) or {"probe_exact": 0, "n_probed": 0, "misses": [], "specials": 0}
    cause = sentinel_cause(res)
    return {
        "greedy": greedy,
        "fixed_under": under_constrained(sound, "fixed", greedy),
        "served": served,
        "fixed_fail": fixed_fail,
        "sentinel_under": under_constrained(sound, "sentinel"),
        **census_facts(ok["census"]),
        **probe,
        "lb_forced": forced.get("llama-bpe", {}).get("upstream", {}).get("not_prefix"),
        "lb_leak": leak.get("llama-bpe", {}).get("upstream", {}).get("allowed_with_space"),
        **native_facts(ok["native"]),
        "cardinality": cardinality(forced, census),
        "examples": bool(examples),
        "sentinel_cause": cause,
        **later_commits(upstream.load()),
        "sentinel_exact": sentinel_exact(ok["exactness"], cause),
    }


def answer_tables(said: dict[str, str], ok: Loaded) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Guide 10's questions and the guide's other claims, each with the fragment's answer and
    its evidence."""

    def held(e: str) -> str:
        return e if e and ok.get(EVIDENCE_SOURCE.get(e, ""), None) else ""

    rows = [
        {"#": n, "concern": q, "the guide": g, "the results": said[f"a{n}"], "evidence": held(e)}
        for (n, q, g), e in zip(GUIDE_10, GUIDE_10_EVIDENCE)
    ]
    claims = [
        {"guide": guide_no, "claim": claim, "the results": said[block], "evidence": held(e)}
        for guide_no, claim, block, e in OTHER_CLAIMS
    ]
    return pd.DataFrame(rows), pd.DataFrame(claims)


@takes_page_data
def review_section(res: PageData) -> Section | None:
    """Guide 10's eight questions, each answered from the results, with the evidence linked."""
    ok = {a: res.load(a)[0] for a in REVIEWED}
    if not ok["census"]:
        return None
    examples = sentinel_examples(ok["soundness"])
    said = blocks("review", **review_facts(res, ok, examples))
    questions, claims = answer_tables(said, ok)
    sec = Section("review", "What a reviewer should push on (guide 10), answered from the results")
    sec.claim, sec.text = said["claim"], said["text"]
    sec.views.append(Table(questions))
    sec.views.append(
        Table(claims, caption="The guide's other one-measurement claims (7.2, 9, 5.2, 4.5)", collapsed=True)
    )
    if examples:
        sec.views.append(
            Table(
                pd.DataFrame(examples),
                caption="5.2 in real bytes: one illegal (step, token) pair of the sentinel bridge per vocab",
                note=said["examples_note"],
                collapsed=True,
            )
        )
    return sec
