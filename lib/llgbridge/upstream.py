"""What the review says about code outside this repository, as recorded evidence: `upstream.json`.

Every sentence of the report about llama.cpp upstream (what master holds, the PR's base, the tree
that was tested, other PRs and what they fix) is made from this record, never typed into a
template. The record has two kinds of entry:

- computed from a llama.cpp git history by `refresh` (`python -m llgbridge.upstream refresh --git
  DIR --vendored TREE`): the base commit and whether master contains it, each file's blob id at
  the base, at master's head and in the tested (vendored) tree, the commits on master that touch
  the bridge and whether each touches the token table or `tokenize_fn`, whether the PR's patches
  apply at the base and at master with no fuzz, the guide's line citations at the base, and which
  functions of `src/llama-vocab.cpp` differ between the base and the tested tree;
- recorded by hand, with where and when each was read (`threads`, `copies`, `vendored.date`):
  the public issue and pull-request threads the review names. `refresh` keeps them as they are.

Reading the record needs no history (`load`); a test recomputes the claims made from it.

But: the history read is a maintainer's public fork whose master runs to the date recorded, not
llama.cpp's own repository (too large to fetch here); a commit after that date is not in it.

Standard library only: the report and the tests read it, and `refresh` runs `git` and `patch`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RECORD = Path(__file__).with_name("upstream.json")
# the files the PR touches, and the ones its behaviour rests on
PR_FILES = ("common/llguidance.cpp", "tests/test-grammar-llguidance.cpp", "tests/CMakeLists.txt", "include/llama.h")
CONTEXT_FILES = ("src/llama-vocab.cpp", "common/CMakeLists.txt")
BRIDGE = "common/llguidance.cpp"
# the two places of the bridge that bugs A and B live in (guide 3.2): a commit that changes a line
# inside either function's body touches them
TOKEN_TABLE_FN = "llama_sampler_llg_new_tokenizer"
TOKENIZE_FN = "llama_sampler_llg_tokenize_fn"
# what a line of the token loop names: its two conversion calls and the arrays it fills
TOKEN_LOOP = r"llama_detokenize|llama_token_to_piece|token_bytes|token_lens|\\xff"
# common_sampler_init's refusal of a grammar that gave no sampler
NULL_CHECK = r"if \(!grmr && !grammar_str\.empty\(\)\)"
# the functions of llama-vocab.cpp the guide's bugs go through (guide 4.2, 5.1)
VOCAB_PATHS = ("tokenize", "detokenize", "token_to_piece")


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


def load(path: Path = RECORD) -> dict[str, Any]:
    """The record, as committed."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def blob_id(data: bytes) -> str:
    """git's blob id of `data` (`git hash-object`), so a file here compares with a history's."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def tree_blob(tree: Path, rel: str) -> str:
    """The blob id of `rel` in an extracted tree, or "" where it is not there."""
    p = tree / rel
    return blob_id(p.read_bytes()) if p.is_file() else ""


def short(commit: str) -> str:
    return commit[:8]


def same_blob(record: dict[str, Any], rel: str, a: str, b: str) -> bool:
    """Whether the record holds the same blob of `rel` at `a` and at `b` (base, master, vendored)."""
    f = record["files"].get(rel, {})
    return bool(f.get(a)) and f.get(a) == f.get(b)


def thread(record: dict[str, Any], ref: str) -> dict[str, Any]:
    """The hand-recorded thread `ref` ("ggml-org/llama.cpp#19349"); KeyError names it if absent."""
    for t in record["threads"]:
        if t["ref"] == ref:
            return dict(t)
    raise KeyError(f"upstream.json records no thread {ref}")


# --- refresh: computed from a history -------------------------------------------------------


def _git(git_dir: Path, *args: str) -> str:
    out = subprocess.run(["git", "--git-dir", str(git_dir), *args], capture_output=True, check=True)
    return out.stdout.decode("utf-8", "replace")


def _git_bytes(git_dir: Path, *args: str) -> bytes:
    return subprocess.run(["git", "--git-dir", str(git_dir), *args], capture_output=True, check=True).stdout


def function_lines(text: str, name: str) -> tuple[int, int] | None:
    """The 1-based line range of a C function's definition in `text`: from the line that names it
    at column 0 to the first line that is `}` alone."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith((" ", "\t", "#", "/")) and re.search(rf"\b{re.escape(name)}\(", line):
            for j in range(i, len(lines)):
                if lines[j].rstrip() == "}":
                    return i + 1, j + 1
    return None


def _hunks(diff: str) -> list[tuple[int, int, int, int]]:
    """(old start, old count, new start, new count) of every hunk of a unified diff."""
    out = []
    for m in re.finditer(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", diff, re.M):
        out.append((int(m[1]), int(m[2] or 1), int(m[3]), int(m[4] or 1)))
    return out


def _touches(ranges: list[tuple[int, int] | None], starts: list[tuple[int, int]]) -> bool:
    for r in ranges:
        if r is None:
            continue
        lo, hi = r
        for start, count in starts:
            if count and start <= hi and start + count - 1 >= lo:
                return True
    return False


def bridge_commits(git_dir: Path, ref: str) -> list[dict[str, Any]]:
    """The commits on `ref` that change the bridge, oldest first, each with whether it changes a
    line of the token table's function or of `tokenize_fn` (on either side of the change)."""
    log = _git(git_dir, "log", "--reverse", "--format=%H%x09%cs%x09%s", ref, "--", BRIDGE)
    out = []
    for line in log.splitlines():
        commit, date, subject = line.split("\t", 2)
        parent = _git(git_dir, "rev-list", "--parents", "-n", "1", commit).split()[1:2]
        new = _git(git_dir, "show", f"{commit}:{BRIDGE}")
        old = _git(git_dir, "show", f"{parent[0]}:{BRIDGE}") if parent and _exists(git_dir, parent[0]) else ""
        diff = _git(git_dir, "diff", "-U0", f"{parent[0]}" if parent else "--root", commit, "--", BRIDGE)
        hunks = _hunks(diff)
        old_at, new_at = [(h[0], h[1]) for h in hunks], [(h[2], h[3]) for h in hunks]
        pr = re.search(r"\(#(\d+)\)\s*$", subject)

        def touched(fn: str, old: str = old, new: str = new, old_at: list = old_at, new_at: list = new_at) -> bool:
            return _touches([function_lines(old, fn)], old_at) or _touches([function_lines(new, fn)], new_at)

        # the token loop is part of the table's function: a change there names one of its calls
        loop = [
            x
            for x in diff.splitlines()
            if x[:1] in "+-" and not x.startswith(("+++", "---")) and re.search(TOKEN_LOOP, x)
        ]

        out.append(
            {
                "commit": commit,
                "date": date,
                "subject": subject,
                "pr": pr[1] if pr else "",
                "adds_file": not old,
                "token_table": touched(TOKEN_TABLE_FN) and bool(loop),
                "tokenize_fn": touched(TOKENIZE_FN),
            }
        )
    return out


def _exists(git_dir: Path, commit: str) -> bool:
    try:
        _git(git_dir, "cat-file", "-e", f"{commit}:{BRIDGE}")
        return True
    except subprocess.CalledProcessError:
        return False


def _extract(git_dir: Path, commit: str, dest: Path, files: tuple[str, ...]) -> None:
    for rel in files:
        p = dest / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(_git_bytes(git_dir, "show", f"{commit}:{rel}"))


def patch_results(git_dir: Path, commits: dict[str, str], patches: list[Path]) -> dict[str, dict[str, Any]]:
    """Whether each patch applies with no fuzz at each commit: the PR's series in order, and each
    candidate on top of the whole series, in a tree of its own: {patch: {where: {"applies",
    "offsets"}}}."""
    series = [p for p in patches if p.parent.name != "candidates"]
    out: dict[str, dict[str, Any]] = {p.name: {} for p in patches}
    for where, commit in commits.items():
        for target in [None, *[p for p in patches if p not in series]]:
            with tempfile.TemporaryDirectory() as tmp:
                tree = Path(tmp)
                _extract(git_dir, commit, tree, PR_FILES)
                ok = True
                for p in series:
                    applies, offsets = _patch(tree, p) if ok else (False, [])
                    ok = ok and applies
                    if target is None:
                        out[p.name][where] = {"applies": applies, "offsets": offsets}
                if target is not None:
                    applies, offsets = _patch(tree, target) if ok else (False, [])
                    out[target.name][where] = {"applies": applies, "offsets": offsets}
    return out


def _patch(tree: Path, patch: Path) -> tuple[bool, list[int]]:
    run = subprocess.run(
        ["patch", "-p1", "--fuzz=0", "--no-backup-if-mismatch", "-d", str(tree), "-i", str(patch)],
        capture_output=True,
        text=True,
    )
    return run.returncode == 0, [int(x) for x in re.findall(r"\(offset (-?\d+) lines?\)", run.stdout)]


def vocab_changes(base_text: str, other_text: str) -> dict[str, Any]:
    """How llama-vocab.cpp differs between two versions: the functions its hunks fall in (by `git
    diff`'s own reading of C), and for the hunks inside the bugs' paths (`VOCAB_PATHS`) the lines
    they remove and the vocab types whose `case` labels they add."""
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "a.cpp", Path(tmp) / "b.cpp"
        a.write_text(base_text, encoding="utf-8")
        b.write_text(other_text, encoding="utf-8")
        run = subprocess.run(
            ["git", "diff", "--no-index", "-U0", "--", str(a), str(b)], capture_output=True, text=True, errors="replace"
        )
    functions: set[str] = set()
    paths: list[dict[str, Any]] = []
    for hunk in re.split(r"^(?=@@ )", run.stdout, flags=re.M)[1:]:
        head, _, body = hunk.partition("\n")
        ctx = re.search(r"@@ [^@]* @@ ?(.*)$", head)
        fn_m = re.search(r"([A-Za-z_][\w:~]*)\s*\(", ctx[1] if ctx else "")
        fn = fn_m[1] if fn_m else ((ctx[1].strip() if ctx else "") or "(file scope)")
        functions.add(fn)
        if fn.rsplit("::", 1)[-1] in VOCAB_PATHS:
            lines = body.splitlines()
            added = [x[1:].strip() for x in lines if x.startswith("+")]
            paths.append(
                {
                    "function": fn,
                    "removed": sum(x.startswith("-") for x in lines),
                    "added": len(added),
                    # an added hunk that opens with a new `case` of the vocab-type switch adds a type
                    "adds_case": added[0].split()[1].rstrip(":") if added and added[0].startswith("case ") else "",
                }
            )
    return {"functions": sorted(functions), "path_hunks": paths}


def lines_matching(text: str, pattern: str) -> list[list[Any]]:
    """[line number, the line stripped] of every line of `text` that `pattern` matches."""
    return [[i + 1, x.strip()] for i, x in enumerate(text.splitlines()) if re.search(pattern, x)]


def returns_of(text: str, name: str) -> list[str]:
    """The `return` statements inside a function's definition, stripped."""
    r = function_lines(text, name)
    if r is None:
        return []
    lines = text.splitlines()[r[0] - 1 : r[1]]
    return [x.strip() for x in lines if x.strip().startswith("return")]


def citations_at(tree: Path, citations: list[tuple[str, int, int, str]]) -> list[dict[str, Any]]:
    """Each (file, first line, last line, needle) the guide cites: does the needle stand there."""
    out = []
    for rel, lo, hi, needle in citations:
        lines = (tree / rel).read_text(encoding="utf-8", errors="replace").splitlines()
        holds = any(needle in lines[i - 1] for i in range(lo, min(hi, len(lines)) + 1))
        at = [i + 1 for i, x in enumerate(lines) if needle in x and not x.startswith(" ")] or [
            i + 1 for i, x in enumerate(lines) if needle in x
        ]
        out.append({"file": rel, "lines": [lo, hi], "needle": needle, "holds": holds, "at": at[:1]})
    return out


def tree_facts(git_dir: Path, base_c: str, head: str, vendored: Path) -> dict[str, Any]:
    """Blob ids at the base, master's head and the tested tree; how llama-vocab.cpp differs between
    the base and the tested tree; the llguidance pin of each; where common_sampler_init refuses a
    null grammar sampler (#24154's check)."""
    files = {
        rel: {
            "base": _git(git_dir, "rev-parse", f"{base_c}:{rel}").strip(),
            "master": _git(git_dir, "rev-parse", f"{head}:{rel}").strip(),
            "vendored": tree_blob(vendored, rel),
        }
        for rel in (*PR_FILES, *CONTEXT_FILES)
    }

    def here(rel: str) -> str:
        return (vendored / rel).read_text(encoding="utf-8", errors="replace")

    changed = vocab_changes(_git(git_dir, "show", f"{base_c}:src/llama-vocab.cpp"), here("src/llama-vocab.cpp"))
    return {
        "files": files,
        "llama_vocab_changed": {**changed, "paths": list(VOCAB_PATHS)},
        "llguidance_pin": {
            "base": _pin(_git(git_dir, "show", f"{base_c}:common/CMakeLists.txt")),
            "vendored": _pin(here("common/CMakeLists.txt")),
        },
        "null_check": {
            "base": lines_matching(_git(git_dir, "show", f"{base_c}:common/sampling.cpp"), NULL_CHECK),
            "vendored": lines_matching(here("common/sampling.cpp"), NULL_CHECK),
        },
    }


def base_facts(
    git_dir: Path, base_c: str, patches: list[Path], citations: list[tuple[str, int, int, str]]
) -> dict[str, Any]:
    """At the base: the guide's line citations, every return of llama_sampler_init_llg, and where
    that function is defined, alone and with the PR's 0001 applied."""
    bridge_base = _git(git_dir, "show", f"{base_c}:{BRIDGE}")
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        _extract(git_dir, base_c, t, PR_FILES)
        cited = citations_at(t, citations)
        first = next((p for p in patches if p.name.startswith("0001")), None)
        patched = _patch(t, first)[0] if first else False
        text = (t / BRIDGE).read_text(encoding="utf-8")
        with_0001 = function_lines(text, "llama_sampler_init_llg") if patched else None
    at_base = function_lines(bridge_base, "llama_sampler_init_llg")
    return {
        "citations_at_base": cited,
        "init_llg_returns": returns_of(bridge_base, "llama_sampler_init_llg"),
        "init_llg_line": {"base": at_base[0] if at_base else 0, "with_0001": with_0001[0] if with_0001 else 0},
    }


def refresh(
    git_dir: Path,
    vendored: Path,
    patches: list[Path],
    citations: list[tuple[str, int, int, str]],
    ref: str = "master",
    base: str = "030ebb55",
) -> dict[str, Any]:
    """The record's computed part from a llama.cpp history and the tested tree; the hand-recorded
    part kept from the committed record."""
    old = load() if RECORD.exists() else {}
    base_c = _git(git_dir, "rev-parse", f"{base}^{{commit}}").strip()
    head = _git(git_dir, "rev-parse", f"{ref}^{{commit}}").strip()
    ancestry = ["git", "--git-dir", str(git_dir), "merge-base", "--is-ancestor", base_c, head]
    return {
        "read": old.get("read", ""),
        "history": {
            **old.get("history", {}),
            "master": {"commit": head, "date": _git(git_dir, "log", "-1", "--format=%cs", head).strip()},
        },
        "base": {
            "commit": base_c,
            "date": _git(git_dir, "log", "-1", "--format=%cs", base_c).strip(),
            "subject": _git(git_dir, "log", "-1", "--format=%s", base_c).strip(),
            "on_master": subprocess.run(ancestry).returncode == 0,
        },
        "vendored": {**old.get("vendored", {}), "commit": _vendored_commit(vendored, old)},
        **tree_facts(git_dir, base_c, head, vendored),
        **base_facts(git_dir, base_c, patches, citations),
        "bridge_commits": bridge_commits(git_dir, head),
        "patches": patch_results(git_dir, {"base": base_c, "master": head}, patches),
        "threads": old.get("threads", []),
        "copies": old.get("copies", []),
    }


def _vendored_commit(vendored: Path, old: dict[str, Any]) -> str:
    # the native build writes the sdist's recorded commit beside the tree it extracts
    p = vendored / "LLAMA_CPP_COMMIT"
    return p.read_text().strip() if p.exists() else str(old.get("vendored", {}).get("commit", ""))


def _pin(cmake: str) -> str:
    m = re.search(r"GIT_TAG\s+([0-9a-f]{40})", cmake)
    return m[1] if m else ""


def pin_of(cmake: Path) -> str:
    """The llguidance commit a tree's common/CMakeLists.txt fetches, or ""."""
    try:
        return _pin(cmake.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return ""


def dump(record: dict[str, Any], path: Path = RECORD) -> None:
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m llgbridge.upstream", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("refresh", help="recompute the record's computed part from a llama.cpp history")
    r.add_argument("--git", required=True, type=Path, help="a llama.cpp git directory (a bare clone is enough)")
    r.add_argument("--vendored", required=True, type=Path, help="the tested tree (make native extracts it)")
    r.add_argument("--ref", default="master")
    r.add_argument("--read", default="", help="the date the history was read (YYYY-MM-DD)")
    a = ap.parse_args(argv)
    root = Path(__file__).resolve().parents[2] / "patches"
    patches = sorted(root.glob("*.patch")) + sorted((root / "candidates").glob("*.patch"))
    cites = [(c.file, c.lines[0], c.lines[1], c.needle) for c in CITATIONS]
    try:
        rec = refresh(a.git, a.vendored, patches, cites, ref=a.ref)
    except (subprocess.CalledProcessError, OSError) as e:
        print(f"upstream refresh: {a.git}: {e}", file=sys.stderr)
        return 1
    if a.read:
        rec["read"] = a.read
    dump(rec)
    print(
        f"wrote {RECORD.name}: master {short(rec['history']['master']['commit'])}, base {short(rec['base']['commit'])}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
