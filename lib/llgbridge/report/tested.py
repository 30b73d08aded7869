"""What was tested against what the PR is: `patches/` against the guide's diffstat, and the tested
llama.cpp tree against the PR's base and master, for the four files the PR touches.

The PR's own diff is in no source this suite can read; what can be had is compared, the rest is
said plainly:

- the patches' line counts, per file, computed from `patches/` at every render;
- the guide's line citations into those files, each checked against the tested (vendored) tree;
- the base and master as the evidence record holds them (`upstream.json`: blob ids, the commits
  that change the bridge, where the patches apply), against the tested tree's own blobs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import upstream
from ..analyses.native.builder import SHIPPED, patch_files
from ..analyses.native.compute import vendored_commit
from ..upstream import CITATIONS

FILES = ("common/llguidance.cpp", "tests/test-grammar-llguidance.cpp", "tests/CMakeLists.txt", "include/llama.h")
# the guide's first lines: "Diff: 4 files, 152 insertions, 13 deletions"
GUIDE_DIFFSTAT = (4, 152, 13)
# the comments the guide quotes from the fix, by section, in lines (4.5's, and 5.3's header of the probe)
GUIDE_QUOTED_COMMENTS = {"4.5": 2, "5.3": 2}


def _count(patch: Path) -> dict[str, dict[str, int]]:
    """Per file of one patch: insertions, deletions, and the insertions that are comments or blank."""
    out: dict[str, dict[str, int]] = {}
    cur = ""
    for line in patch.read_text(encoding="utf-8").splitlines():
        if line.startswith("+++ "):
            cur = line[4:].removeprefix("b/")
            out.setdefault(cur, {"+": 0, "-": 0, "comment": 0, "blank": 0})
        elif line.startswith("--- ") or not cur:
            continue
        elif line.startswith("+"):
            out[cur]["+"] += 1
            body = line[1:].strip()
            out[cur]["comment"] += body.startswith(("//", "#"))
            out[cur]["blank"] += not body
        elif line.startswith("-"):
            out[cur]["-"] += 1
    return out


def comment_before(needle: str) -> int:
    """How many added comment lines stand right above the added line holding `needle` in the PR's
    patches (0 where there is none)."""
    for p in patch_files():
        added = [
            x[1:].strip()
            for x in p.read_text(encoding="utf-8").splitlines()
            if x.startswith("+") and not x.startswith("+++")
        ]
        for i, line in enumerate(added):
            if needle in line:
                n = 0
                while i - n - 1 >= 0 and added[i - n - 1].startswith("//"):
                    n += 1
                return n
    return 0


# the code lines the guide quotes a comment above: 4.5's token-bytes call, 5.3's probe
QUOTED_AT = {
    "4.5": "llama_token_to_piece(vocab, token, dp, max_token, 0, false)",
    "5.3": "static bool llama_sampler_llg_tokenize_is_exact(",
}


def diffstat() -> dict[str, dict[str, int]]:
    """`patches/` per file, summed over the series (the PR's 0001-0003, not the candidates)."""
    total: dict[str, dict[str, int]] = {}
    for p in patch_files():
        for f, c in _count(p).items():
            t = total.setdefault(f, {"+": 0, "-": 0, "comment": 0, "blank": 0})
            for k, n in c.items():
                t[k] += n
    return {f: total[f] for f in sorted(total, key=lambda f: FILES.index(f) if f in FILES else 99)}


def check_citations(tree: Path = SHIPPED) -> list[dict[str, Any]]:
    """Each of the guide's line citations against the tested tree: where its needle is."""
    out: list[dict[str, Any]] = []
    for c in CITATIONS:
        path = tree / c.file
        if not path.exists():
            out.append({"citation": c, "holds": None, "here": "the tested tree is not extracted (make native)"})
            continue
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        lo, hi = c.lines
        holds = any(c.needle in lines[i - 1] for i in range(lo, min(hi, len(lines)) + 1))
        at = [i + 1 for i, x in enumerate(lines) if c.needle in x and (c.needle.endswith("(") or i + 1 >= lo - 200)]
        # a function's name: where it is defined (its line starts with the type), else the first hit
        defs = [i for i in at if not lines[i - 1].startswith(" ")] or at
        out.append({"citation": c, "holds": holds, "here": "" if holds else (f":{defs[0]}" if defs else "not found")})
    return out


def diffstat_table(stat: dict[str, dict[str, int]]) -> list[str]:
    """The patches' line counts per file and in all, as a Markdown table."""
    plus, minus = sum(c["+"] for c in stat.values()), sum(c["-"] for c in stat.values())
    rows = ["| file | this suite's patches | of the insertions: comments, blank |", "|---|---|---|"]
    rows += [f"| `{f}` | +{c['+']} −{c['-']} | {c['comment']}, {c['blank']} |" for f, c in stat.items()]
    rows += [
        f"| **{len(stat)} files** | **+{plus} −{minus}** | {sum(c['comment'] for c in stat.values())}, "
        f"{sum(c['blank'] for c in stat.values())} |"
    ]
    return rows


def reworded_aborts() -> int:
    """How many of the patches' deletions are `GGML_ABORT` lines (each one reworded, not dropped)."""
    return sum(
        1
        for p in patch_files()
        for x in p.read_text(encoding="utf-8").splitlines()
        if x.startswith("-") and not x.startswith("---") and "GGML_ABORT" in x
    )


def diffstat_paragraph(stat: dict[str, dict[str, int]]) -> str:
    """The patches against the guide's diffstat: how far apart, and what of the difference is known."""
    plus, minus = sum(c["+"] for c in stat.values()), sum(c["-"] for c in stat.values())
    g_files, g_plus, g_minus = GUIDE_DIFFSTAT
    fx = stat.get("common/llguidance.cpp", {"+": 0, "comment": 0, "blank": 0})
    code_lines = fx["+"] - fx["comment"] - fx["blank"]
    ours = {k: comment_before(v) for k, v in QUOTED_AT.items()}
    longer = sum(max(0, ours[k] - GUIDE_QUOTED_COMMENTS[k]) for k in ours)
    return (
        f"**The patches against the guide's diffstat.** `patches/0001-0003` come to **+{plus} −{minus}** in "
        f"{len(stat)} files; the "
        f'guide says "{g_files} files, {g_plus} insertions, {g_minus} deletions": {abs(plus - g_plus)} '
        f"{'more' if plus >= g_plus else 'fewer'} insertions and {abs(g_minus - minus)} "
        f"{'fewer' if minus <= g_minus else 'more'} deletion{'s' if abs(g_minus - minus) != 1 else ''}. The PR's own "
        f"diff is in no source this suite can read (the guide gives only totals), so the difference "
        "cannot be traced line by line. What is known: the patches are this suite's rebuild of the PR from the code "
        "the guide quotes (4.5, 5.3, 7.1-7.3, 9), in the same four files and order; where the guide quotes a comment, "
        "ours is longer "
        f"(4.5: {ours['4.5']} lines, the guide's {GUIDE_QUOTED_COMMENTS['4.5']}; 5.3's header of the probe: "
        f"{ours['5.3']}, the guide's {GUIDE_QUOTED_COMMENTS['5.3']}), which is {longer} of the {plus - g_plus} "
        f"insertions; the rest lie where the guide quotes nothing (the probe's body, the tests' helpers). In "
        f"`common/llguidance.cpp` ours has {code_lines} lines of code against the "
        f'guide\'s "the fix itself is ~20 lines", and {reworded_aborts()} of its deletions reword `GGML_ABORT` '
        "messages, which the guide does not mention."
    )


def base_paragraph(commit: str) -> str:
    """The tested tree against the PR's base, from the evidence record (`upstream.json`) and the
    tested tree's own blobs."""
    rec = upstream.load()
    here = {f: upstream.tree_blob(SHIPPED, f) for f in FILES}
    at = rec["files"]
    rows = [
        f"| `{f}` | `{upstream.short(at[f]['base'])}` | `{upstream.short(at[f]['master'])}` | "
        f"`{upstream.short(here[f]) or '?'}` | {'same as the base' if here[f] == at[f]['base'] else 'differs'} |"
        for f in FILES
    ]
    cites = rec["citations_at_base"]
    held = [c for c in cites if c["holds"]]
    missed = "; ".join(
        f"{c['file']}:{c['lines'][0]} (`{c['needle']}` is at :{c['at'][0]})" for c in cites if not c["holds"]
    )
    master = rec["history"]["master"]
    return "\n".join(
        [
            f"**The tested tree against the PR's base and master**, from the evidence record "
            f"(`lib/llgbridge/upstream.json`, read {rec['read']} in {rec['history']['repository']}, "
            f"{rec['history']['what']}). The code under test is llama.cpp `{commit[:12] or '?'}` (the tree "
            f"llama-cpp-python vendors); the PR's base is `{upstream.short(rec['base']['commit'])}` "
            f"({rec['base']['date']}{', on master' if rec['base']['on_master'] else ''}); master's head is "
            f"`{upstream.short(master['commit'])}` ({master['date']}). Blob ids:",
            "",
            "| file | at the base | at master | tested | tested against the base |",
            "|---|---|---|---|---|",
            *rows,
            "",
            f"Of the guide's {len(cites)} line citations into these files, {len(held)} land on the code it names at "
            f"the base" + (f"; not {missed}" if missed else "") + ".",
        ]
    )


def upstream_lines() -> list[str]:
    """The commits on master that change the bridge, and whether each touches bug A's or bug B's code."""
    rec = upstream.load()
    rows = [
        f"| `{c['commit'][:9]}` | {c['date']} | #{c['pr']} | {'yes' if c['token_table'] else 'no'} | "
        f"{'yes' if c['tokenize_fn'] else 'no'} |"
        for c in rec["bridge_commits"]
    ]
    patches = rec["patches"]
    applies = "; ".join(
        f"{p[:4]}: {', '.join(w for w in ('base', 'master') if patches[p][w]['applies']) or 'neither'}"
        for p in sorted(patches)
    )
    return [
        "**`common/llguidance.cpp` on master**: every commit that changes it, and whether it changes a line of the "
        "token loop (bug A) or of `tokenize_fn` (bug B):",
        "",
        "| commit | date | PR | token loop | tokenize_fn |",
        "|---|---|---|---|---|",
        *rows,
        "",
        f"Where each patch applies with no fuzz: {applies}. A copy of `common/llguidance.cpp` some stores keep under "
        + "the upstream name is a pull request's branch, not master: "
        + "; ".join(f"`{c['commit']}` is {c['is']} ({c['shows']})" for c in rec["copies"])
        + ".",
    ]


def section_markdown() -> str:
    """The section's text: the diffstat reconciled, the guide's citations checked, upstream compared."""
    stat = diffstat()
    commit = vendored_commit()
    lines = [
        diffstat_paragraph(stat),
        "",
        *diffstat_table(stat),
        "",
        base_paragraph(commit),
        "",
        *upstream_lines(),
    ]
    return "\n".join(lines) + "\n"


__all__ = ["FILES", "GUIDE_DIFFSTAT", "CITATIONS", "diffstat", "check_citations", "section_markdown"]
