"""The compiled code (guide 7, 8 unit level): llama.cpp's own test, and the port checked cell by cell."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from ... import guide
from ...report.data import PageData, takes_page_data
from ...report.prose import blocks
from ...report.table import (
    GUIDE_VOCABS,
    REPAIRED,
    SAME,
    Cell,
    Section,
    Table,
    group_rows,
    guide_order,
    int_columns,
    matched,
    shows,
    vocab_key,
)
from ...results import port_llguidance
from .compute import LLG_PINNED as NATIVE_PIN
from .compute import RULES, version_key


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
        return Cell(text, REPAIRED if up.get("pr_test_exit") not in (0, None, "") else "ok")
    if any(bad_tokens(fx)):
        return Cell(text, "bad")
    return Cell(text, SAME if same else "bad")


def difference_causes(diffs: pd.DataFrame) -> pd.DataFrame:
    """The differing steps, one row per (vocab, llguidance, what the C++ said, what the port said):
    how many steps, on which samplers and walks. 55 steps of one panic are one row."""
    d = diffs.assign(
        said=diffs["cpp"].astype(str).str.replace(r"^step \d+: ", "", regex=True),
        port_said=diffs["port"].astype(str).str.replace(r"^\d+ steps?$", "walks on to the end", regex=True),
    )
    rows = []
    for (v, llg, said, port), g in d.groupby(["vocab", "llguidance", "said", "port_said"], sort=False):
        rows.append(
            {
                "vocab": v,
                "llguidance": llg,
                "steps": len(g),
                "samplers": ", ".join(dict.fromkeys(g.sampler)),
                "walks": len(set(g.job)),
                "the compiled sampler": said,
                "the port": port,
            }
        )
    return pd.DataFrame(rows)


def abort_causes(df: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """Every (vocab, test, sampler) whose test exited non-zero, with the cause `native.causes` named
    and its rule; empty for results made before causes were named."""
    if "pr_test_cause" not in df:
        return pd.DataFrame()
    rank = {v: i for i, v in enumerate(order)}
    rows = []
    for r in df.to_dict("records"):
        for test, col in (("PR test", "pr_test"), ("test as shipped", "shipped_test")):
            if str(r.get(f"{col}_exit", "")) not in ("", "0") and r.get(f"{col}_cause"):
                rows.append(
                    {
                        "vocab": r["vocab"],
                        "test": test,
                        "sampler": r["sampler"],
                        "exit": r[f"{col}_exit"],
                        "rule": r.get(f"{col}_rule", ""),
                        "cause": r[f"{col}_cause"],
                    }
                )
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    out["_v"] = out.vocab.map(lambda v: rank.get(v, len(rank)))
    return (
        out.sort_values(["_v", "test", "sampler"], ascending=[True, True, False], kind="stable")
        .drop(columns="_v")
        .reset_index(drop=True)
    )


def rule_table(causes: pd.DataFrame) -> pd.DataFrame:
    """Each of `native.RULES` that named a cause: what it recognises, and the (vocab, test, sampler)
    it named it for."""
    rows = []
    for rule, what in RULES.items():
        hit = causes[causes.rule == rule]
        if not hit.empty:
            rows.append(
                {
                    "rule": rule,
                    "what it recognises": what,
                    "runs": len(hit),
                    "where": "; ".join(f"{r.vocab} ({r.test}, {r.sampler})" for r in hit.itertuples()),
                }
            )
    return pd.DataFrame(rows)


# the test cells compared between llguidance versions
TEST_COLUMNS = (
    "pr_test_exit",
    "no_space_bad",
    "forced_bad",
    "string_tests",
    "pr_test_failure",
    "shipped_test_exit",
    "shipped_test_failure",
    "greedy",
)


@dataclass
class Native:
    """The native results as frames: one row per (vocab, llguidance, sampler), upstream first as
    the guide's tables have it; the steps where the port and the compiled sampler differ; the
    vocabs in the guide's order; the llguidance versions built, and the one the tables lead with
    (what llama.cpp links) and the one the port drives."""

    df: pd.DataFrame
    diffs: pd.DataFrame
    order: list[str]
    built: list[str]
    pinned: str
    port_llg: str

    def get(self, v: str, s: str, llg: str = "") -> dict[str, Any]:
        df = self.df
        row = df[(df.vocab == v) & (df.sampler == s) & (df.llguidance == (llg or self.pinned))]
        return row.iloc[0].to_dict() if not row.empty else {}

    def matches(self, v: str) -> str:
        """Guide table 7's row of `v` against ours: ✓, ✗, or blank where the guide has none."""
        if v not in guide.UNIT:
            return ""
        got = [(self.get(v, s).get("pr_test_exit"), self.get(v, s).get("no_space_bad")) for s in ("upstream", "fixed")]
        return "✓" if got == [tuple(x) for x in guide.UNIT[v]] else "✗"


def native_frames(ok: list[dict[str, Any]]) -> Native:
    df = int_columns(pd.DataFrame([row for r in ok for row in r["rows"]]))
    port_llg = port_llguidance(ok)  # as the results record it, never the venv's now (issue 48, break 2)
    if "llguidance" not in df:
        df["llguidance"] = port_llg
    rank = df.sampler.map({"upstream": 0, "fixed": 1})
    df = (
        df.assign(_rank=rank, _v=df.llguidance.map(version_key))
        .sort_values(["vocab", "_v", "_rank"], kind="stable", key=vocab_key)
        .drop(columns=["_rank", "_v"])
        .reset_index(drop=True)
    )
    diffs = pd.DataFrame([d for r in ok for d in r.get("differences", [])])
    if not diffs.empty and "llguidance" not in diffs:
        diffs["llguidance"] = port_llg
    built = sorted(df.llguidance.unique(), key=version_key)
    pinned = NATIVE_PIN if NATIVE_PIN in built else port_llg
    return Native(df, diffs, guide_order(list(df.vocab.unique())), built, pinned, port_llg)


def _pr_cell(r: dict[str, Any]) -> str:
    if not r or r.get("pr_test_exit", "") == "":
        return "not run"
    return f"exit {r['pr_test_exit']}: {r['no_space_bad']} with a space, {r['forced_bad']} not a prefix"


def table7(n: Native, match: dict[str, str]) -> pd.DataFrame:
    """Guide table 7 from the compiled code: the PR's test per vocab and sampler, beside the guide's."""
    t7 = []
    for v in n.order:
        up, fx = n.get(v, "upstream"), n.get(v, "fixed")
        g = guide.UNIT.get(v)
        up_bad = bool(up.get("no_space_bad") or up.get("forced_bad"))
        # the fixed cell's colour and cause as the verdict's (an abort with no wrong token is not the bug)
        verdict_cell = pr_test_cell(up, fx)
        cause = str(verdict_cell.value).split(": ", 1)[1] if ": " in str(verdict_cell.value) else ""
        t7.append(
            {
                "vocab": v,
                "PR test, upstream sampler": Cell(_pr_cell(up), shows(up_bad)),
                "PR test, fixed sampler": Cell(_pr_cell(fx) + (f" ({cause})" if cause else ""), verdict_cell.cls),
                "string tests (fixed)": fx.get("string_tests", "") or "not run",
                "guide: without / with": f"exit {g[0][0]}, {g[0][1]} bad / exit {g[1][0]}, {g[1][1]} bad" if g else "",
                "match": Cell(match[v], matched(match[v])),
            }
        )
    return group_rows(pd.DataFrame(t7), keep=frozenset(GUIDE_VOCABS))


def _shipped_cell(r: dict[str, Any]) -> str:
    if not r or r.get("shipped_test_exit", "") == "":
        return ""
    return "exit 0" if r["shipped_test_exit"] == 0 else f"exit {r['shipped_test_exit']}: {r['shipped_test_failure']}"


def shipped_table(n: Native) -> pd.DataFrame:
    """The test before the PR, per vocab and sampler."""
    shipped = pd.DataFrame(
        [
            {
                "vocab": v,
                "tok_eos": n.get(v, "upstream").get("tok_eos", ""),
                "test as shipped, upstream sampler": _shipped_cell(n.get(v, "upstream")),
                "test as shipped, fixed sampler": _shipped_cell(n.get(v, "fixed")),
                "the sampler's first llg error (fixed)": n.get(v, "fixed").get("shipped_test_llg_error", ""),
            }
            for v in n.order
        ]
    )
    return group_rows(shipped, keep=frozenset(GUIDE_VOCABS))


def version_diffs(n: Native) -> list[dict[str, Any]]:
    """Every test cell that differs between the pinned llguidance and another built one."""
    vdiff = []
    for other in (x for x in n.built if x != n.pinned):
        for v in n.order:
            for smp in ("upstream", "fixed"):
                a, b = n.get(v, smp, n.pinned), n.get(v, smp, other)
                changed = [c for c in TEST_COLUMNS if a and b and str(a.get(c, "")) != str(b.get(c, ""))]
                if changed:
                    vdiff.append(
                        {
                            "vocab": v,
                            "sampler": smp,
                            "what": ", ".join(changed),
                            f"llguidance {n.pinned}": "; ".join(f"{c}={a.get(c)}" for c in changed),
                            f"llguidance {other}": "; ".join(f"{c}={b.get(c)}" for c in changed),
                        }
                    )
    return vdiff


def _steps(rows: pd.DataFrame) -> tuple[int, int]:
    """(steps compared, steps that differ) between the port and the compiled sampler over `rows`."""
    cells = int(pd.to_numeric(rows["diff_cells"], errors="coerce").fillna(0).sum())
    return cells, int(pd.to_numeric(rows["diff_differ"], errors="coerce").fillna(0).sum())


def native_prose(res: PageData, n: Native, match: dict[str, str], n_vdiff: int) -> dict[str, str]:
    df, diffs, port_llg = n.df, n.diffs, n.port_llg
    # like with like: the port drives the venv's llguidance, so its differential is against that build
    cells, differ = _steps(df[df.llguidance == port_llg])
    cross_cells, cross_differ = _steps(df[df.llguidance != port_llg])
    where = []
    if cross_differ and not diffs.empty:
        cd = diffs[diffs.llguidance != port_llg]
        where = [
            f"{v}, {len(g)} steps on {g.sampler.nunique()} samplers (llguidance {llg} said: {said[:90]})"
            for (v, llg, said), g in cd.assign(said=cd.cpp.astype(str).str.split(": ", n=1).str[-1]).groupby(
                ["vocab", "llguidance", "said"], sort=True
            )
        ]
    harness_errors = df[df["harness_error"].astype(str) != ""]
    return blocks(
        "native",
        patches=res.patches_link,
        built=n.built,
        pinned=n.pinned,
        port_llg=port_llg,
        reproduced=sum(1 for v in guide.UNIT if match[v] == "✓"),
        unit_here=sum(1 for v in guide.UNIT if v in n.order),
        unit_names=list(guide.UNIT),
        n_unit=len(guide.UNIT),
        n_vdiff=n_vdiff,
        others=[x for x in n.built if x != port_llg],
        cross_cells=cross_cells,
        cross_differ=cross_differ,
        where=where,
        n_diffs=len(diffs),
        cells=cells,
        n_vocabs=df.vocab.nunique(),
        differ=differ,
        unfinished=[f"{r.vocab}/{r.sampler}" for r in harness_errors.itertuples()],
    )


def native_views(n: Native, match: dict[str, str], said: dict[str, str], vdiff: list[dict[str, Any]]) -> list[Table]:
    """Guide table 7, why the test exits non-zero and by which rule, the versions' differences, the
    port's differences, the test before the PR."""
    views = [Table(table7(n, match), f"Guide table 7, from the compiled code (llguidance {n.pinned})")]
    causes = abort_causes(n.df[n.df.llguidance == n.pinned], n.order)
    if not causes.empty:
        caption = f"Why llama.cpp's test exits non-zero, per vocab and build (llguidance {n.pinned})"
        views.append(Table(causes, caption, note=said["causes_note"], collapsed=True))
        views.append(Table(rule_table(causes), "Each rule that names a cause, and where it applied", collapsed=True))
    if len(n.built) > 1 and vdiff:
        caption = "Test results that differ between the llguidance versions"
        views.append(Table(pd.DataFrame(vdiff), caption, collapsed=True))
    if not n.diffs.empty:
        caption = "Every step where the compiled sampler and the port differ, one row per cause"
        views.append(Table(difference_causes(n.diffs), caption, note=said["diff_note"], collapsed=True))
    caption = "The test before the PR, on every vocab"
    views.append(Table(shipped_table(n), caption, note=said["shipped_note"], collapsed=True))
    return views


@takes_page_data
def native_section(res: PageData) -> Section | None:
    ok, _ = res.load("native")
    if not ok:
        return None
    n = native_frames(ok)
    match = {v: n.matches(v) for v in (*n.order, *guide.UNIT)}
    vdiff = version_diffs(n)
    said = native_prose(res, n, match, len(vdiff))
    sec = Section(
        "native",
        "The compiled code: llama.cpp's own test, and the port checked (guide 7, 8 unit level)",
        notebook="native",
    )
    sec.claim, sec.text, sec.more = said["claim"], said["text"], said.get("more", "")
    sec.views += native_views(n, match, said, vdiff)
    sec.raw_table("native", n.df)
    if not n.diffs.empty:
        sec.raw_table("native_differences", n.diffs)
    return sec
