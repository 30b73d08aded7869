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

from . import gfm
from .claims import Claim
from .data import PageData
from .prose import blocks
from .verdict import Verdict

LIMIT = 10_000
# the order of the comment's parts, by claim key (a part without its claim is left out)
HEAD = ("partial", "tested", "call", "asks", "fixes")
FINDINGS = ("server", "stand_in", "costs", "alternative")
GUIDE = ("reproduced", "xff", "probe")
BEYOND = ("bug_c", "bug_d", "ignored")


def comment(vt: Verdict, found: dict[str, Claim], res: PageData) -> str:
    """The comment's Markdown (see the module's note), from the claims."""
    said = blocks("comment")

    def part(keys: tuple[str, ...]) -> list[str]:
        return [found[k].text for k in keys if k in found and found[k].text.strip()]

    # the vocabs' table is the page's (index.html, pr-review-tables.md): the comment says its counts
    parts = ["## llguidance bridge fix (bugs A and B): an independent measurement", *part(HEAD)]
    parts += part(FINDINGS)
    if guide := part(GUIDE):
        parts.append(said["guide"] + " " + guide[0] + "\n\n" + "\n".join(guide[1:]))
    if beyond := part(BEYOND):
        parts.append(said["beyond"] + "\n\n" + "\n".join(beyond))
    if "repro" in found:
        parts += [said["repro"], found["repro"].text]
    parts.append(said["source"])
    return gfm.prose_blocks("\n\n".join(p for p in parts if p.strip())) + "\n"


__all__ = ["comment", "LIMIT"]
