"""What was tested against what the PR is: `patches/` against the guide's diffstat, and the tested
llama.cpp tree against the PR's base and against upstream today, for the four files the PR touches.

The PR's own diff and its base tree are in no source this suite can read; what can be had is
compared, the rest is said plainly:

- the patches' line counts, per file, computed from `patches/` at every render;
- the guide's line citations into those files, each checked against the tested (vendored) tree;
- upstream's current versions of the four files, as the search tool's store holds them (one
  version each, at the commit named): read by hand on the date below, and summed up in
  `UPSTREAM` (what each shows, and whether the PR's hunks apply there); a maintainer repeats it
  with `git diff` in a checkout.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..analyses.native.builder import SHIPPED, patch_files
from ..analyses.native.compute import vendored_commit
from .table import PR_BASE

FILES = ("common/llguidance.cpp", "tests/test-grammar-llguidance.cpp", "tests/CMakeLists.txt", "include/llama.h")
# the guide's first lines: "Diff: 4 files, 152 insertions, 13 deletions"
GUIDE_DIFFSTAT = (4, 152, 13)
# the comments the guide quotes from the fix, by section, in lines (4.5's, and 5.3's header of the probe)
GUIDE_QUOTED_COMMENTS = {"4.5": 2, "5.3": 2}


@dataclass(frozen=True)
class Citation:
    """One `file:line` the guide cites, and a string that line (or range) must hold there."""

    file: str
    lines: tuple[int, int]
    names: str  # what the guide says is there
    needle: str


CITATIONS = (
    Citation("common/llguidance.cpp", (17, 17), "llama_sampler_llg_new", "llama_sampler_llg_new("),
    Citation("common/llguidance.cpp", (25, 30), "llg_new_matcher's error: logged, no matcher", "LOG_ERR"),
    Citation("common/llguidance.cpp", (39, 39), "llama_sampler_llg_accept_impl", "llama_sampler_llg_accept_impl("),
    Citation("common/llguidance.cpp", (46, 46), "llama_sampler_llg_apply", "llama_sampler_llg_apply("),
    Citation(
        "common/llguidance.cpp",
        (53, 58),
        "the silent drop: the matcher freed, the grammar set to null",
        "ctx->grammar = nullptr",
    ),
    Citation(
        "common/llguidance.cpp", (80, 80), "the clone's own llama_sampler_init_llg call", "llama_sampler_init_llg("
    ),
    Citation("common/llguidance.cpp", (123, 123), "llama_sampler_llg_tokenize_fn", "llama_sampler_llg_tokenize_fn("),
    Citation(
        "common/llguidance.cpp", (139, 139), "llama_sampler_llg_new_tokenizer", "llama_sampler_llg_new_tokenizer("
    ),
    Citation("common/llguidance.cpp", (141, 146), "the vocab and tokenizer caches", "vocab_cache"),
    Citation("common/llguidance.cpp", (262, 262), "llama_sampler_init_llg", "llama_sampler_init_llg("),
    Citation(
        "tests/CMakeLists.txt", (148, 148), "the one llguidance ctest entry (llama-bpe)", "test-grammar-llguidance.cpp"
    ),
    Citation(
        "include/llama.h",
        (1156, 1158),
        "llama_tokenize's parse_special doc, with the stale sentence",
        "Does not insert a leading space",
    ),
)

# Upstream's current version of each file as stored by the search tool, read on 2026-12-02 (one
# version per file; the commits' order against 0c1e5709 is not known here): what it shows, and
# whether the PR's hunks for it apply there (`patch --dry-run --fuzz=0` on that text).
UPSTREAM = (
    (
        "common/llguidance.cpp",
        "b2524ff5825f",
        "still both bugs: the token table from single-token `llama_detokenize` (now `(…, false, true)`) and "
        "`llama_tokenize` as `tokenize_fn`; its token loop marks special tokens by attribute (CONTROL or USER_DEFINED "
        "get the `\\xff` marker), which is what PR #15837 proposes",
        "0001's hunk 2 of 4 (the token loop) does not apply: a rebase conflict",
    ),
    (
        "tests/test-grammar-llguidance.cpp",
        "9af7a01a09a8",
        "no byte-exactness test; `main` runs the five string tests, then `test_sampler_chain`, as the tested file does",
        "the context of 0002's hunks is there (read by hand)",
    ),
    (
        "tests/CMakeLists.txt",
        "c62a495a02f2",
        "one llguidance ctest entry (llama-bpe), as tested; the line after its block differs",
        "0002's hunk applies with fuzz 1, not with --fuzz=0",
    ),
    (
        "include/llama.h",
        "3679b65db16e",
        'the stale "Does not insert a leading space" is still there',
        "0003's one line is there to delete",
    ),
)


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
    """The tested tree against the PR's base: no diff is possible here, so the evidence that they agree."""
    checks = check_citations()
    held = [x for x in checks if x["holds"]]
    missed = [x for x in checks if x["holds"] is False]
    moved = "; ".join(
        f"{x['citation'].file}:{'-'.join(map(str, sorted(set(x['citation'].lines))))} ({x['citation'].names}) "
        f"is at {x['here']} here"
        for x in missed
    )
    return (
        f"**The tested tree against the PR's base.** The code under test is llama.cpp at `{commit[:12] or '?'}` (the "
        f"tree llama-cpp-python vendors); the PR is based on `{PR_BASE}`, of which no copy is stored here, so the two "
        f"cannot be diffed. Evidence: the patches apply to the tested tree with `--fuzz=0` (every hunk's context is "
        f"there); of the guide's {len(checks)} line citations into these files, {len(held)} land on the code it names "
        f"in the tested tree"
        + (": " + moved if missed else "")
        + ". A maintainer checks it in a checkout: `git diff "
        + PR_BASE
        + " "
        + (commit[:8] or "0c1e5709")
        + " -- "
        + " ".join(FILES)
        + "`."
    )


def upstream_lines(commit: str) -> list[str]:
    """The tested tree against upstream today: the files' upstream versions as read by hand (`UPSTREAM`)."""
    return [
        "**Against upstream today.** Upstream's current version of each file, as far as this machine can see it (the "
        "repository is too large to fetch; a search index stores one recent version of some files), read on "
        "2026-12-02:",
        "",
        "| file | upstream commit | what it shows | the PR's patch there |",
        "|---|---|---|---|",
        *[f"| `{f}` | `{c}` | {what} | {applies} |" for f, c, what, applies in UPSTREAM],
        "",
        "The order of these commits against the tested one is not known here, and nothing else of upstream could be "
        "compared. In a checkout: `git diff "
        + (commit[:8] or "0c1e5709")
        + " origin/master -- "
        + " ".join(FILES)
        + "`.",
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
        *upstream_lines(commit),
    ]
    return "\n".join(lines) + "\n"


__all__ = ["FILES", "GUIDE_DIFFSTAT", "CITATIONS", "UPSTREAM", "diffstat", "check_citations", "section_markdown"]
