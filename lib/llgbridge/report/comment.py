"""`reports/pr-comment.md`: the review as one GitHub comment, read in two minutes.

It opens with the recommendation and the rules it follows from, then what the PR fixes, what it
costs, where the suite disagrees with the guide, what stays broken and is not a regression, what
was tested, and the commands that reproduce the headline findings. Everything comes from the same
`Verdict` the page opens with. It stands alone in a comment: no relative link (the only links are
upstream issues, absolute), no raw HTML, every token's text escaped or in a code span (`gfm`), and
at most `LIMIT` characters (a GitHub comment holds 65,536; this one should be read, not scrolled).
"""

from __future__ import annotations

from . import gfm, repro, tested
from .data import Results
from .prose import blocks
from .table import md_table
from .verdict import ISSUES_URL, Verdict, recommendation_md

LIMIT = 10_000
# the server cases the comment repeats (the page has them all): bug B, bug A on BPE, bug C
COMMENT_CASES = ("forced_literal", "dots", "special_literal")


def affected_table(vt: Verdict) -> str:
    """The vocabs bug A or B hits, one row each: what the fix changes, the counts apart."""
    cols = [
        "input",
        "type",
        "bug A: tokens with wrong bytes",
        "bug A: illegal tokens admitted",
        "with the fix: illegal admitted",
        "bug B: forced mask",
        "with the fix: forced mask",
        "the PR's test: exit without → with",
    ]
    hit = set(vt.facts.get("hit_a", [])) | set(vt.facts.get("hit_b", []))
    df = vt.df[vt.df["input"].isin(hit)][[c for c in cols if c in vt.df]]
    return md_table(
        df.rename(
            columns={
                "bug A: tokens with wrong bytes": "wrong token bytes",
                "bug A: illegal tokens admitted": "illegal admitted, without",
                "with the fix: illegal admitted": "with",
                "bug B: forced mask": "forced mask, without",
                "with the fix: forced mask": "with ",
                "the PR's test: exit without → with": "PR test exit",
            }
        )
    )


def repro_compact(res: Results) -> str:
    """The unit commands, and one server command line per model with the comment's curl requests."""
    units = repro.unit_repros(res)
    servers = [s for s in repro.server_repros(res) if s.case in COMMENT_CASES]
    lines = []
    if units:
        lines += [
            "```sh",
            "# in a llama.cpp checkout with the PR applied; exit codes as this suite's builds gave them",
            *repro.BUILD,
        ]
        lines += [f"{u.command}   # with the fix: {u.with_}, without: {u.without}" for u in units]
        lines += [
            "# without the fix: " + "; ".join(repro.REVERT[:1]) + ", rebuild, rerun; then " + repro.RESTORE,
            "```",
        ]
    for model in dict.fromkeys(s.model for s in servers):
        mine = [s for s in servers if s.model == model]
        lines += ["", "```sh", mine[0].server_command()]
        for s in mine:
            lines += [
                f"# {s.finding}: without the fix {s.without.outcome} ({s.without.content!r}), with it "
                f"{s.with_.outcome} ({s.with_.content!r})",
                s.curl(),
            ]
        lines += ["```"]
    return "\n".join(lines) + "\n"


def comment(vt: Verdict, res: Results) -> str:
    """The comment's Markdown (see the module's note); a part without results is left out."""
    f = vt.facts
    stat = tested.diffstat()
    plus, minus = sum(c["+"] for c in stat.values()), sum(c["-"] for c in stat.values())
    checks = tested.check_citations()
    said = blocks(
        "comment",
        cited=(sum(x["holds"] is True for x in checks), len(checks)),
        call=vt.recommendation.get("call", ""),
        rules=recommendation_md(vt.recommendation),
        f=f,
        reproduced=vt.reproduced,
        plus=plus,
        minus=minus,
        guide=tested.GUIDE_DIFFSTAT,
        upstream=tested.UPSTREAM,
        url=ISSUES_URL,
        commit=(tested.vendored_commit() or "")[:12],
        base=tested.PR_BASE,
    )
    parts = ["## llguidance bridge: token bytes and tokenize_fn, measured", said["call"], said["fixes"]]
    if f.get("hit_a") or f.get("hit_b"):
        parts.append(affected_table(vt).rstrip())
    parts += [said["costs"]]
    if vt.disagreements:
        parts.append(said["disagree"] + "\n\n" + "\n".join(f"- {d}" for d in vt.disagreements))
    parts += [said["beyond"], said["tested"]]
    code = repro_compact(res)
    if code.strip():
        parts += [said["repro"], code.rstrip()]
    parts.append(said["source"])
    return gfm.prose_blocks("\n\n".join(p for p in parts if p.strip())) + "\n"


__all__ = ["comment", "LIMIT", "affected_table", "repro_compact"]
