"""`reports/pr-comment.md`: the review as one GitHub comment, read in a few minutes.

It opens with what was tested (a rebuild of the PR, not its branch), then the recommendation, stated
as conditional on the same checks passing on the branch, and the asks for the author; then what the
PR fixes on the shipped vocabs, the stand-in apart, what it costs, where a measured figure
contradicts the guide, what stays broken beyond the PR, and commands a maintainer can paste. Every
sentence with a figure or a judgement is a claim (`claims.py`), which `tests/test_claims.py`
recomputes from the tables. It stands alone in a comment: no relative link (the only links are
upstream issues, absolute), no raw HTML, every token's text escaped or in a code span (`gfm`), and
at most `LIMIT` characters (a GitHub comment holds 65,536; this one should be read, not scrolled).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from . import gfm
from .claims import Claim
from .data import PageData
from .prose import blocks
from .table import guide_order, md_table, pinned_rows
from .verdict import Verdict

LIMIT = 10_000
# the order of the comment's parts, by claim key (a part without its claim is left out)
HEAD = ("tested", "call", "asks", "fixes")
FINDINGS = ("server", "stand_in", "costs", "alternative")
GUIDE = ("reproduced", "xff", "probe")
BEYOND = ("bug_c", "bug_d", "ignored", "chat400", "engines")


# what a non-zero exit of the PR's test is, by the rule the native analysis named (causes.RULES)
RULE_SHORT = {
    "space_tokens": "bug A",
    "forced_not_prefix": "bug B",
    "llg_limit": "bug D",
    "no_eos": "no end-of-sequence token",
    "string_not_spelled": "guide 7.3",
}


def _exit_side(row: dict[str, Any]) -> str:
    code = row.get("pr_test_exit", "?")
    rule = str(row.get("pr_test_rule") or "")
    if code in (0, "0") or not rule:
        return str(code)
    return f"{code} ({RULE_SHORT.get(rule, rule.replace('_', ' '))})"


def _exit_cell(up: dict[str, Any], fx: dict[str, Any]) -> str:
    """Each side's exit with the cause the native analysis named for it: without the fix the
    first abort is the one the test met first, which is not always the one left after it."""
    if not up or not fx:
        return "not run"
    return f"{_exit_side(up)} → {_exit_side(fx)}"


def affected_table(vt: Verdict, found: dict[str, Claim], res: PageData) -> str:
    """The vocabs bug A or B hits, one row each, then the stand-ins, labelled: each measure
    without → with the fix in one column."""
    fx = found["fixes"].values
    stand = {s["input"]: s for s in found["stand_in"].values["stand_ins"]} if "stand_in" in found else {}
    hit = list(dict.fromkeys([*fx["hit_a"], *fx["hit_b"]]))
    hit = [v for v in guide_order(list(vt.facts["census"])) if v in hit] + [
        v for v in stand if v in {*vt.facts["hit_a"], *vt.facts["hit_b"]}
    ]
    nat_ok, _ = res.load("native")
    nat = {r["vocab"]: {x["sampler"]: {**x, "vocab": r["vocab"]} for x in pinned_rows(r)} for r in nat_ok}

    def arrow(rows: dict[str, dict[str, Any]], col: str, fmt: Any = str) -> str:
        if "upstream" not in rows or "fixed" not in rows:
            return "not run"
        return f"{fmt(rows['upstream'].get(col))} → {fmt(rows['fixed'].get(col))}"

    def mask(n: Any) -> str:
        return "ok" if not n else f"{n} not a prefix"

    rows = []
    for v in hit:
        rows.append(
            {
                "input": v + (" (stand-in)" if v in stand else ""),
                "type": vt.facts["census"][v].get("vocab_type", ""),
                "tokens with wrong bytes": vt.facts["census"][v]["differing"],
                # the compiled sampler on llguidance as llama.cpp pins it, as the paragraph above says
                "illegal tokens admitted, without → with the fix": arrow(nat.get(v, {}), "no_space_bad"),
                "forced mask, without → with": arrow(nat.get(v, {}), "forced_bad", mask),
                "the PR's test exit, without → with": _exit_cell(
                    nat.get(v, {}).get("upstream", {}), nat.get(v, {}).get("fixed", {})
                ),
            }
        )
    return md_table(pd.DataFrame(rows))


def comment(vt: Verdict, found: dict[str, Claim], res: PageData) -> str:
    """The comment's Markdown (see the module's note), from the claims."""
    said = blocks("comment")

    def part(keys: tuple[str, ...]) -> list[str]:
        return [found[k].text for k in keys if k in found and found[k].text.strip()]

    parts = ["## llguidance bridge fix (bugs A and B): an independent measurement", *part(HEAD)]
    if "fixes" in found and (found["fixes"].values["hit_a"] or found["fixes"].values["hit_b"]):
        parts.append(affected_table(vt, found, res).rstrip())
    parts += part(FINDINGS)
    if guide := part(GUIDE):
        parts.append(said["guide"] + " " + guide[0] + "\n\n" + "\n".join(guide[1:]))
    if beyond := part(BEYOND):
        parts.append(said["beyond"] + "\n\n" + "\n".join(beyond))
    if "repro" in found:
        parts += [said["repro"], found["repro"].text]
    parts.append(said["source"])
    return gfm.prose_blocks("\n\n".join(p for p in parts if p.strip())) + "\n"


__all__ = ["comment", "LIMIT", "affected_table"]
