"""Every figure of the PR comment, recomputed from the committed tables by this file's own queries.

`reports/claims.json` is what the comment says, claim by claim, with the values each sentence
states; `reports/pr-comment.md` is made from it. Here each value is computed again from
`reports/tables/*.csv` with pandas (and, for the two figures no table holds, from the fixture
through llama.cpp), never through `report.claims`, and any that disagree fail. A claim that
disputes the guide must quote the guide's own words. Nothing here needs `data/results`: it runs on
a fresh clone.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from llgbridge import guide
from llgbridge.catalogue import overridden
from llgbridge.paths import REPORTS, vocab_path
from llgbridge.report import gfm

GUIDE_TEXT = Path(__file__).resolve().parents[2] / "shared" / "000_18c51097d446d5b9.txt"
PINNED = "1.0.1"  # llama.cpp's llguidance pin (common/CMakeLists.txt), as the comment states it
PR_CASES = ("forced_literal", "json_enum", "half_free", "dots", "no_space")


def _claims(path: Path = REPORTS / "claims.json") -> dict[str, dict[str, Any]]:
    return {c["key"]: c for c in json.loads(path.read_text(encoding="utf-8"))}


def _read(tables: Path, name: str) -> pd.DataFrame:
    return pd.read_csv(tables / name, keep_default_na=False, na_values=[""])


def _truthy(col: pd.Series) -> pd.Series:
    return col.astype(str).str.lower().isin(["true", "1"])


class Tables:
    """The committed tables, and which inputs count: the stand-ins (inputs loaded with key
    overrides) never do."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.census = _read(root, "census.csv")
        self.stand_ins = [v for v in self.census.vocab if v in overridden()]
        self.shipped = [v for v in self.census.vocab if v not in self.stand_ins]

    def __getattr__(self, name: str) -> pd.DataFrame:
        return _read(self.root, f"{name}.csv")

    def order(self, names: set[str]) -> list[str]:
        return sorted(names)


def _bridge(df: pd.DataFrame, bridge: str, col: str) -> dict[str, Any]:
    x = df[df.bridge == bridge]
    return dict(zip(x.vocab, x[col]))


def expected_fixes(t: Tables) -> dict[str, Any]:
    leak, forced, native = t.leak, t.forced, t.native
    differing = dict(zip(t.census.vocab, t.census.differing))
    up_illegal = _bridge(leak, "upstream", "allowed_illegal")
    up_np, up_ok = _bridge(forced, "upstream", "not_prefix"), _bridge(forced, "upstream", "output_ok")
    hit_a = [v for v in t.shipped if differing[v] > 0 or (up_illegal.get(v) or 0) > 0]
    hit_b = [v for v in t.shipped if (up_np.get(v) or 0) > 0 or str(up_ok.get(v)).lower() == "false"]
    types = dict(zip(t.census.vocab, t.census.vocab_type))
    fx_illegal, fx_np = _bridge(leak, "fixed", "allowed_illegal"), _bridge(forced, "fixed", "not_prefix")
    fx_ok = _bridge(forced, "fixed", "output_ok")
    repaired = [
        v
        for v in dict.fromkeys(hit_a + hit_b)
        if not fx_illegal.get(v) and not fx_np.get(v) and str(fx_ok.get(v)).lower() != "false"
    ]
    pinned = native[native.llguidance == PINNED]
    ctest = {
        v: [
            int(pinned[(pinned.vocab == v) & (pinned.sampler == s)].pr_test_exit.iloc[0]) for s in ("upstream", "fixed")
        ]
        for v in ("llama-bpe", "llama-spm")
    }
    bpe = [int(up_illegal[v]) for v in hit_a if types[v] == "BPE"]
    return {
        "n": len(t.shipped),
        "hit_a": sorted(hit_a),
        "hit_b": sorted(hit_b),
        "b_types": {v: types[v] for v in hit_b},
        "bpe_range": [min(bpe), max(bpe)],
        "spm_illegal": {v: int(up_illegal[v]) for v in hit_a if types[v] in ("SPM", "UGM")},
        "repaired": sorted(repaired),
        "broken": sorted(set(hit_a + hit_b) - set(repaired)),
        "ctest": ctest,
    }


def expected_server(t: Tables) -> dict[str, Any]:
    s = t.server
    s = s[(s.llguidance == PINNED) & s.vocab.isin(t.shipped)]
    pr = s[s.case.isin(PR_CASES)]
    up = pr[pr.sampler == "upstream"]
    fail = up[up.outcome != "pass"]
    c = s[s.case.isin(["special_literal", "special_pattern"]) & (s.outcome == "violation")]
    return {
        "models": s.model.nunique(),
        "requests": len(up),
        "failing": len(fail),
        "silent": len(fail[(fail.http_status == 200) & ~_truthy(fail.error_field)]),
        "fixed_fail": int((pr[pr.sampler == "fixed"].outcome != "pass").sum()),
        "bug_c": {
            case: {b: c[(c.case == case) & (c.sampler == b)].model.nunique() for b in ("upstream", "fixed")}
            for case in ("special_literal", "special_pattern")
        },
    }


def expected_stand_in(t: Tables) -> dict[str, Any]:
    s = t.server
    out = []
    for v in t.stand_ins:
        g = s[(s.vocab == v) & (s.llguidance == PINNED) & s.case.isin(guide.SERVER_CASES)]
        out.append(
            {
                "input": v,
                "up": int((g[g.sampler == "upstream"].outcome == "pass").sum()),
                "fx": int((g[g.sampler == "fixed"].outcome == "pass").sum()),
            }
        )
    return {"stand_ins": out}


def expected_beyond(t: Tables) -> dict[str, dict[str, Any]]:
    sp = t.beyond_special
    sp = sp[(sp.llguidance == PINNED) & sp.vocab.isin(t.shipped)]
    stuck = {
        b: sorted(set(sp[(sp.sampler == b) & (sp.steps > 0) & ~_truthy(sp.complete)].vocab))
        for b in ("upstream", "fixed", "nospecial")
    }
    nat = t.native
    d = nat[(nat.llguidance == PINNED) & (nat.sampler == "fixed") & (nat.pr_test_rule == "llg_limit")]
    s = t.server
    rej = s[s.case == "rejected_schema"]
    chat = s[(s.case == "json_enum_chat") & (s.http_status >= 400)]
    builds = len(s[s.case == "json_enum_chat"][["sampler", "llguidance"]].drop_duplicates())
    return {
        "bug_c": {
            "without": stuck["upstream"],
            "with": stuck["fixed"],
            "candidate": stuck["nospecial"],
            "walked": sp[sp.sampler == "fixed"].vocab.nunique(),
        },
        "bug_d": {
            "hit": sorted(set(d.vocab) & set(t.shipped)),
            "stand_ins": sorted(set(d.vocab) & set(t.stand_ins)),
        },
        "ignored": {"n": int((rej.outcome == "ignored").sum()), "of": len(rej), "models": rej.model.nunique()},
        "chat400": {
            "vocabs": sorted(set(chat.vocab) & set(t.shipped)),
            "stand_ins": sorted(set(chat.vocab) & set(t.stand_ins)),
            "builds": builds,
            "every_build": all(
                len(chat[chat.vocab == v][["sampler", "llguidance"]].drop_duplicates()) == builds
                for v in set(chat.vocab)
            ),
        },
    }


def expected_engines(t: Tables) -> dict[str, Any]:
    every = t.engines
    every = every[every.vocab.isin(t.shipped)]
    e = every[every.error.isna()]
    out = []
    for name in dict.fromkeys(e.engine):
        mine = e[e.engine == name]
        out.append(
            {
                "engine": name,
                "n": len(mine),
                "failed": sorted(every[(every.engine == name) & every.error.notna()].vocab),
                **{k: sorted(mine[mine[f"bug_{k}"] == "yes"].vocab) for k in ("a", "b", "c")},
                "leaks": sorted(mine[mine.allowed_illegal > 0].vocab),
            }
        )
    return {"engines": out}


def expected_other(t: Tables) -> dict[str, dict[str, Any]]:
    probe, pvx = t.probe, t.probe_vs_exactness
    pvx = pvx[pvx.vocab.isin(t.shipped)]
    misses = pvx[pvx.cell.astype(str).str.startswith("probe misses")]
    specials = misses[_truthy(misses.inexact_only_specials)]
    nat = t.native
    return {
        "tested": {
            "n_shipped": len(t.shipped),
            "n_real": int((t.census.real_model.notna() & t.census.vocab.isin(t.shipped)).sum()),
            "stand_ins": t.stand_ins,
            "versions": sorted(set(nat.llguidance.astype(str))),
        },
        "costs": {"costs": sorted(set(probe[_truthy(probe.greedy)].vocab) & set(t.shipped))},
        "probe": {
            "exact": int(_truthy(pvx.probe_exact).sum()),
            "n": len(pvx),
            "misses": sorted(misses.vocab),
            "specials": sorted(specials.vocab),
        },
    }


def expected_reproduced(t: Tables) -> dict[str, int]:
    """Guide 4.3, 4.4, 7.1 and 7.2's figures against the tables (4.3's examples are checked by
    `test_the_guides_examples_hold_on_the_fixtures`, through llama.cpp)."""
    c = t.census.set_index("vocab")
    figs = [
        (int(c.loc[v, "differing"]), int(c.loc[v, "lost_leading_space"]), int(c.loc[v, "n_tokens"])) == want
        for v, want in guide.CENSUS.items()
    ]
    figs += [True] * len(guide.EXAMPLES)
    leak = t.leak
    figs += [
        tuple(int(_bridge(leak, b, "allowed_with_space")[v]) for b in ("upstream", "fixed")) == want
        for v, want in guide.LEAK.items()
    ]
    forced = t.forced
    for v, wants in guide.FORCED.items():
        for b, want in zip(("upstream", "fixed"), wants):
            got = sorted(json.loads(_bridge(forced, b, "pieces")[v]))
            figs.append(got == sorted(p.decode() for p in want))
    nat = t.native
    nat = nat[nat.llguidance == PINNED]
    for v, wants in guide.UNIT.items():
        for s, want in zip(("upstream", "fixed"), wants):
            r = nat[(nat.vocab == v) & (nat.sampler == s)].iloc[0]
            figs.append((int(r.pr_test_exit), int(r.no_space_bad)) == tuple(want))
    return {"matched": sum(figs), "of": len(figs)}


# values that are maps from an input (or a case) to a figure: the claim must name the same keys, no more
WHOLE = frozenset({"spm_illegal", "b_types", "ctest", "bug_c"})


def _subset(claimed: Any, want: Any, path: str) -> list[str]:
    """Where the claim's values differ from the recomputed ones: every key recomputed, and for a
    map in `WHOLE` its keys too (a record, such as a stand-in's, may say more than is recomputed)."""
    if isinstance(want, dict):
        if not isinstance(claimed, dict):
            return [f"{path}: claims {claimed!r}, the tables give {want!r}"]
        nested = "." in path  # a claim's own values are a record; a map inside them is compared whole
        extra = set(claimed) - set(want) if nested and path.rsplit(".", 1)[-1] in WHOLE else set()
        return [f"{path}: claims {sorted(extra)} too"] * bool(extra) + [
            x for k, w in want.items() for x in _subset(claimed.get(k), w, f"{path}.{k}")
        ]
    if isinstance(want, list) and isinstance(claimed, list) and want and isinstance(want[0], dict):
        if len(want) != len(claimed):
            return [f"{path}: claims {len(claimed)} records, the tables give {len(want)}"]
        return [x for i, (c, w) in enumerate(zip(claimed, want)) for x in _subset(c, w, f"{path}[{i}]")]
    if isinstance(want, list) and isinstance(claimed, list) and all(isinstance(x, str) for x in want):
        claimed, want = sorted(claimed), sorted(want)
    if claimed != want:
        return [f"{path}: claims {claimed!r}, the tables give {want!r}"]
    return []


def disagreements(claims: dict[str, dict[str, Any]], tables: Path) -> list[str]:
    t = Tables(tables)
    want: dict[str, Any] = {
        "fixes": expected_fixes(t),
        "server": expected_server(t),
        "stand_in": expected_stand_in(t),
        "reproduced": expected_reproduced(t),
        **({"engines": expected_engines(t)} if (tables / "engines.csv").exists() else {}),
        **expected_beyond(t),
        **expected_other(t),
    }
    out = []
    for key, values in want.items():
        if key not in claims:
            out.append(f"{key}: no such claim, though its tables have rows")
            continue
        out += _subset(claims[key]["values"], values, key)
    return out


def test_every_figure_of_the_comment_matches_its_tables() -> None:
    assert disagreements(_claims(), REPORTS / "tables") == []


def test_a_figure_changed_by_hand_in_a_table_is_caught(tmp_path: Path) -> None:
    """The check is not a tautology: llama-bpe's bug A figures set to 0 by hand (census and leak)
    make the comment's "hits N of M" disagree with the tables."""
    tables = tmp_path / "tables"
    shutil.copytree(REPORTS / "tables", tables)
    census = pd.read_csv(tables / "census.csv", keep_default_na=False, dtype=str)
    census.loc[census.vocab == "llama-bpe", "differing"] = "0"
    census.to_csv(tables / "census.csv", index=False, lineterminator="\n")
    leak = pd.read_csv(tables / "leak.csv", keep_default_na=False, dtype=str)
    leak.loc[(leak.vocab == "llama-bpe") & (leak.bridge == "upstream"), "allowed_illegal"] = "0"
    leak.to_csv(tables / "leak.csv", index=False, lineterminator="\n")
    found = disagreements(_claims(), tables)
    assert any(x.startswith("fixes.hit_a") for x in found), found


def test_each_claim_is_said_in_the_comment_as_recorded() -> None:
    comment = (REPORTS / "pr-comment.md").read_text(encoding="utf-8")
    missing = [k for k, c in _claims().items() if c["text"] and gfm.prose_blocks(c["text"]).strip() not in comment]
    assert missing == []


_FIGURE = re.compile(r"(?<![\w.#`-])\d[\d,.]*\d|(?<![\w.#`-])\d(?![\w])")


def _prose(md: str) -> list[str]:
    """The comment's sentences: no title, no table, no code block, no code span, no link target."""
    out, fenced = [], False
    for line in md.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.startswith(("|", "##")):
            continue
        line = re.sub(r"`[^`]*`", "", line)
        out.append(re.sub(r"\]\([^)]*\)", "]", line))
    return out


def test_every_figure_in_the_comments_prose_comes_from_a_claim() -> None:
    """A figure typed into a template, or computed beside the claims, would escape the check above."""
    said = " ".join(_prose("\n".join(gfm.prose_blocks(c["text"]) for c in _claims().values())))
    from_claims = set(_FIGURE.findall(said))
    stray = [
        (line, f)
        for line in _prose((REPORTS / "pr-comment.md").read_text(encoding="utf-8"))
        for f in _FIGURE.findall(line)
        if f not in from_claims
    ]
    assert stray == []


def test_a_dispute_quotes_the_guides_own_words() -> None:
    if not GUIDE_TEXT.exists():
        pytest.skip("the guide is not beside this checkout")
    text = " ".join(GUIDE_TEXT.read_text(encoding="utf-8").split())
    for key, c in _claims().items():
        if c["disputes"]:
            assert " ".join(c["disputes"].split()) in text, key


def test_no_stand_in_is_counted_among_the_shipped_vocabs() -> None:
    stand_ins = set(overridden())
    for key, c in _claims().items():
        for field in ("hit_a", "hit_b", "repaired", "costs", "hit", "without", "with", "misses", "vocabs"):
            assert not stand_ins & set(c["values"].get(field) or []), (key, field)


def test_the_lone_space_tokens_are_what_llama_cpp_says() -> None:
    """Guide 4.5's dispute, checked on the fixtures through llama.cpp (no table holds the tokens):
    each token the claim names has a piece of spaces only that single-token detokenize empties."""
    from llgbridge.vocab import Vocab

    xff = _claims().get("xff")
    if xff is None:
        pytest.skip("no vocab has such a token")
    for v, tokens in xff["values"]["moved"].items():
        vocab = Vocab(vocab_path(v))
        for token, piece in tokens:
            got = vocab.token_to_piece(int(token))
            assert got == piece.encode() and got.strip(b" ") == b"", (v, token, got)
            assert vocab.detokenize([int(token)]) == b"", (v, token)


def test_the_guides_examples_hold_on_the_fixtures() -> None:
    """Guide 4.3's four examples, which `expected_reproduced` counts as matched, through llama.cpp."""
    from llgbridge.vocab import Vocab

    for v, (token, piece, detok) in guide.EXAMPLES.items():
        vocab = Vocab(vocab_path(v))
        assert (vocab.token_to_piece(token), vocab.detokenize([token])) == (piece, detok), v


def test_the_index_verdict_counts_as_the_comment_does() -> None:
    """The page's verdict says the same counts as the comment, by the same rule (stand-ins apart),
    recomputed from the tables: bug A's and bug B's "hits N of M", the fix's repairs, bug C's walk."""
    import html

    t = Tables(REPORTS / "tables")
    want = expected_fixes(t)
    page = html.unescape(re.sub(r"<[^>]+>", "", (REPORTS / "index.html").read_text(encoding="utf-8")))
    verdict = page.split("Verdict", 1)[1]
    n = want["n"]
    assert f"hits {len(want['hit_a'])} of {n} vocabs: {', '.join(_order(want['hit_a'], t))}." in verdict
    assert f"hits {len(want['hit_b'])} of {n} vocabs: {', '.join(_order(want['hit_b'], t))}." in verdict
    assert f"The fix repairs all {len(want['repaired'])} affected vocabs" in verdict
    c = expected_beyond(t)["bug_c"]
    assert f"on {len(c['with'])} of the {c['walked']} vocabs with an end-of-turn token" in verdict


def _order(names: list[str], t: Tables) -> list[str]:
    """`names` in the tables' input order, the guide's vocabs first (census.csv's rows are sorted by
    name; the page leads with the guide's four)."""
    from llgbridge.report.table import guide_order

    return [v for v in guide_order(list(t.census.vocab)) if v in names]
