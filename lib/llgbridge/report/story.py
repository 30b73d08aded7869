"""The sentences a vocab's page opens with."""

from __future__ import annotations

from .. import guide
from ..catalogue import overridden
from ..native import LLG_PINNED as NATIVE_PIN
from .data import Results
from .native import abort_cause, bad_tokens
from .prose import prose
from .table import first_words, pinned_rows


def vocab_story(res: Results, v: str) -> str:
    """A vocab's page opens with what the results say happened there, in a few sentences (Markdown)."""
    census = {r["vocab"]: r for r in res.load("census")[0]}
    leak = {r["vocab"]: {x["bridge"]: x for x in r["rows"]} for r in res.load("leak")[0]}
    forced = {r["vocab"]: {x["bridge"]: x for x in r["rows"]} for r in res.load("forced")[0]}
    probe = {r["vocab"]: r["probe"] for r in res.load("probe")[0]}
    served = [row for r in res.load("server")[0] if r["vocab"] == v for row in r["rows"]]
    special = [x for r in res.load("native")[0] if r["vocab"] == v for x in r.get("special", [])]
    c = census.get(v)
    examples = []
    if c is not None:
        # the guide's own example first where it has one for this vocab (4.3), then the lowest ids
        want = guide.EXAMPLES.get(v, (None,))[0]
        examples = sorted(c["diffs"], key=lambda d: (d["token"] != want, d["token"]))[:3]
    lk = leak.get(v, {})
    up = forced.get(v, {}).get("upstream") or {}
    e2e = None
    if served:
        pick = {(x["sampler"], x["case"]): x for x in served if x["llguidance"] == NATIVE_PIN}
        # the cases where the fix changes the outcome first, then the guide's two headline cases
        order = ("forced_literal", "json_enum", "half_free", "dots", "no_space")
        changed = [
            k
            for k in order
            if (pick.get(("upstream", k)) or {}).get("outcome") != (pick.get(("fixed", k)) or {}).get("outcome")
        ]
        cases = [*changed, *(k for k in ("forced_literal", "json_enum") if k not in changed)][:2]
        parts = [
            {"case": k, "up": pick[("upstream", k)], "fx": pick[("fixed", k)]}
            for k in cases
            if pick.get(("upstream", k)) and pick.get(("fixed", k))
        ]
        if parts:
            e2e = {"kind": "synthetic model" if served[0].get("synthetic") else "real model", "parts": parts}
    fx = next((x for x in special if x.get("sampler") == "fixed"), None)
    nat = {x["sampler"]: x for r in res.load("native")[0] if r["vocab"] == v for x in pinned_rows(r)}
    pr = None
    if "upstream" in nat and "fixed" in nat:
        _, why, same = abort_cause(nat["upstream"], nat["fixed"])
        pr = {
            "without": nat["upstream"].get("pr_test_exit"),
            "with": nat["fixed"].get("pr_test_exit"),
            "bad_without": bad_tokens(nat["upstream"]),
            "bad_with": bad_tokens(nat["fixed"]),
            "why": why,
            "same": same,
        }
    _, text = prose(
        "story",
        census=c["summary"] if c is not None else None,
        examples=examples,
        leak={
            "upstream": lk["upstream"].get("allowed_with_space"),
            "fixed": lk.get("fixed", {}).get("allowed_with_space", "?"),
        }
        if lk.get("upstream") is not None
        else None,
        forced={
            **up,
            "error": first_words(up["error"], 110) if up.get("error") else "",
            "output": str(up.get("output", "")),
        }
        if up
        else None,
        probe=probe.get(v),
        e2e=e2e,
        bug_c=fx if fx and fx.get("steps") else None,
        pr=pr,
        literal=(forced.get(v, {}).get("fixed") or {}).get("output", ""),
    )

    if v in overridden():  # what the input is comes before what happened to it
        text = f"**{v}** is {overridden()[v].why}.\n\n{text}"
    return text
