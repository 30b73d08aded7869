"""The sentences a vocab's page opens with."""

from __future__ import annotations

from typing import Any

from .. import guide
from ..analyses.native.compute import LLG_PINNED as NATIVE_PIN
from ..analyses.native.section import abort_cause, bad_tokens
from ..cases import CASES
from ..catalogue import overridden
from .data import PageData
from .prose import prose
from .table import first_words, pinned_rows

# the server cases the story picks from: where the fix changes the outcome first, then the guide's
# two headline cases
STORY_CASES = tuple(CASES)
HEADLINE_CASES = ("forced_literal", "json_enum")


def census_examples(c: dict[str, Any] | None, v: str) -> list[dict[str, Any]]:
    """Up to three of the vocab's differing tokens: the guide's own example first where it has one
    for this vocab (4.3), then the lowest ids."""
    if c is None:
        return []
    want = guide.EXAMPLES.get(v, (None,))[0]
    return sorted(c["diffs"], key=lambda d: (d["token"] != want, d["token"]))[:3]


def end_to_end(served: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Two server cases on the vocab at llama.cpp's pin, without and with the fix (None where
    none was served)."""
    if not served:
        return None
    pick = {(x["sampler"], x["case"]): x for x in served if x["llguidance"] == NATIVE_PIN}
    changed = [
        k
        for k in STORY_CASES
        if (pick.get(("upstream", k)) or {}).get("outcome") != (pick.get(("fixed", k)) or {}).get("outcome")
    ]
    cases = [*changed, *(k for k in HEADLINE_CASES if k not in changed)][:2]
    parts = [
        {"case": k, "up": pick[("upstream", k)], "fx": pick[("fixed", k)]}
        for k in cases
        if pick.get(("upstream", k)) and pick.get(("fixed", k))
    ]
    if not parts:
        return None
    return {"kind": "synthetic model" if served[0].get("synthetic") else "real model", "parts": parts}


def pr_test(nat: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The PR's test on the vocab without and with the fix, and why it aborts (None where either
    build is missing)."""
    if "upstream" not in nat or "fixed" not in nat:
        return None
    _, why, same = abort_cause(nat["upstream"], nat["fixed"])
    return {
        "without": nat["upstream"].get("pr_test_exit"),
        "with": nat["fixed"].get("pr_test_exit"),
        "bad_without": bad_tokens(nat["upstream"]),
        "bad_with": bad_tokens(nat["fixed"]),
        "why": why,
        "same": same,
    }


def leak_said(lk: dict[str, Any]) -> dict[str, Any] | None:
    """The leak on the vocab (`lk`: its rows by bridge): tokens allowed with a space, without and with the fix."""
    if lk.get("upstream") is None:
        return None
    return {
        "upstream": lk["upstream"].get("allowed_with_space"),
        "fixed": lk.get("fixed", {}).get("allowed_with_space", "?"),
    }


def forced_said(up: dict[str, Any]) -> dict[str, Any] | None:
    """Upstream's forced-literal row on the vocab, its error cut short for a sentence."""
    if not up:
        return None
    return {
        **up,
        "error": first_words(up["error"], 110) if up.get("error") else "",
        "output": str(up.get("output", "")),
    }


def by_bridge(res: PageData, analysis: str, v: str) -> dict[str, Any]:
    """Vocab `v`'s rows of `analysis`, by bridge."""
    return {r["vocab"]: {x["bridge"]: x for x in r["rows"]} for r in res.load(analysis)[0]}.get(v, {})


def vocab_story(res: PageData, v: str) -> str:
    """A vocab's page opens with what the results say happened there, in a few sentences (Markdown)."""
    c = {r["vocab"]: r for r in res.load("census")[0]}.get(v)
    forced = by_bridge(res, "forced", v)
    probe = {r["vocab"]: r["probe"] for r in res.load("probe")[0]}
    served = [row for r in res.load("server")[0] if r["vocab"] == v for row in r["rows"]]
    special = [x for r in res.load("native")[0] if r["vocab"] == v for x in r.get("special", [])]
    fx = next((x for x in special if x.get("sampler") == "fixed"), None)
    nat = {x["sampler"]: x for r in res.load("native")[0] if r["vocab"] == v for x in pinned_rows(r)}
    _, text = prose(
        "story",
        census=c["summary"] if c is not None else None,
        examples=census_examples(c, v),
        leak=leak_said(by_bridge(res, "leak", v)),
        forced=forced_said(forced.get("upstream") or {}),
        probe=probe.get(v),
        e2e=end_to_end(served),
        bug_c=fx if fx and fx.get("steps") else None,
        pr=pr_test(nat),
        literal=(forced.get("fixed") or {}).get("output", ""),
    )

    if v in overridden():  # what the input is comes before what happened to it
        text = f"**{v}** is {overridden()[v].why}.\n\n{text}"
    return text
