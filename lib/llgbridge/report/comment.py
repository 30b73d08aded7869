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

LIMIT = 12_000
# the order of the comment's parts, by claim key (a part without its claim is left out)
HEAD = ("tested", "call", "asks", "fixes")
FINDINGS = ("server", "stand_in", "costs")
GUIDE = ("reproduced", "xff", "probe")
BEYOND = ("bug_c", "bug_d", "ignored", "chat400", "engines")


def _exit_cell(up: dict[str, Any], fx: dict[str, Any], aborts: dict[str, str]) -> str:
    if not up or not fx:
        return "not run"
    cell = f"{up.get('pr_test_exit', '?')} → {fx.get('pr_test_exit', '?')}"
    return cell + (f" ({aborts[up['vocab']]})" if up.get("vocab") in aborts else "")


def affected_table(vt: Verdict, found: dict[str, Claim], res: PageData) -> str:
    """The vocabs bug A or B hits, one row each, then the stand-ins, labelled: each measure
    without → with the fix in one column."""
    fx = found["fixes"].values
    stand = {s["input"]: s for s in found["stand_in"].values["stand_ins"]} if "stand_in" in found else {}
    hit = list(dict.fromkeys([*fx["hit_a"], *fx["hit_b"]]))
    hit = [v for v in guide_order(list(vt.facts["census"])) if v in hit] + [
        v for v in stand if v in {*vt.facts["hit_a"], *vt.facts["hit_b"]}
    ]
    leak = _by(res, "leak", "bridge")
    forced = _by(res, "forced", "bridge")
    nat_ok, _ = res.load("native")
    nat = {r["vocab"]: {x["sampler"]: {**x, "vocab": r["vocab"]} for x in pinned_rows(r)} for r in nat_ok}
    aborts = {x["vocab"]: x["short"] for x in vt.facts.get("aborts", [])}

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
                "illegal tokens admitted, without → with the fix": arrow(leak.get(v, {}), "allowed_illegal"),
                "forced mask, without → with": arrow(forced.get(v, {}), "not_prefix", mask),
                "the PR's test exit, without → with": _exit_cell(
                    nat.get(v, {}).get("upstream", {}), nat.get(v, {}).get("fixed", {}), aborts
                ),
            }
        )
    return md_table(pd.DataFrame(rows))


def _by(res: PageData, analysis: str, key: str) -> dict[str, dict[str, dict[str, Any]]]:
    ok, _ = res.load(analysis)
    return {r["vocab"]: {x[key]: x for x in r["rows"]} for r in ok}


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
