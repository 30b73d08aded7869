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
    """Bugs A and B through the compiled sampler on llama.cpp's pin (native.csv), the census's
    differing tokens counting for A."""
    native = t.native
    pinned = native[native.llguidance == PINNED]
    differing = dict(zip(t.census.vocab, t.census.differing))

    def col(sampler: str, name: str) -> dict[str, int]:
        x = pinned[pinned.sampler == sampler]
        return {v: int(n) if pd.notna(n) else 0 for v, n in zip(x.vocab, x[name])}

    up_bad, up_forced = col("upstream", "no_space_bad"), col("upstream", "forced_bad")
    fx_bad, fx_forced = col("fixed", "no_space_bad"), col("fixed", "forced_bad")
    measured = [v for v in t.shipped if v in up_bad and v in fx_bad]
    hit_a = [v for v in measured if differing[v] > 0 or up_bad[v] > 0]
    hit_b = [v for v in measured if up_forced[v] > 0]
    types = dict(zip(t.census.vocab, t.census.vocab_type))
    repaired = [v for v in dict.fromkeys(hit_a + hit_b) if not fx_bad[v] and not fx_forced[v]]
    ctest = {
        v: [
            int(pinned[(pinned.vocab == v) & (pinned.sampler == s)].pr_test_exit.iloc[0]) for s in ("upstream", "fixed")
        ]
        for v in ("llama-bpe", "llama-spm")
    }
    bpe = [up_bad[v] for v in hit_a if types[v] == "BPE"]
    return {
        "n": len(t.shipped),
        "hit_a": sorted(hit_a),
        "hit_b": sorted(hit_b),
        "b_types": {v: types[v] for v in hit_b},
        "bpe_range": [min(bpe), max(bpe)],
        "spm_illegal": {v: up_bad[v] for v in hit_a if types[v] in ("SPM", "UGM")},
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
    d_before = nat[(nat.llguidance == PINNED) & (nat.sampler == "upstream") & (nat.pr_test_rule == "llg_limit")]
    s = t.server
    rej = s[s.case == "rejected_schema"]
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
            "before": sorted(set(d_before.vocab) & set(d.vocab) & set(t.shipped)),
        },
        "ignored": {"n": int((rej.outcome == "ignored").sum()), "of": len(rej), "models": rej.model.nunique()},
    }


def expected_other(t: Tables) -> dict[str, dict[str, Any]]:
    probe, pvx, sound = t.probe, t.probe_vs_exactness, t.soundness
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
        "costs": {
            "costs": sorted(set(probe[_truthy(probe.greedy)].vocab) & set(t.shipped)),
            "greedy_under": int(
                sound[
                    (sound.bridge == "fixed")
                    & sound.vocab.isin(set(probe[_truthy(probe.greedy)].vocab) & set(t.shipped))
                ].under.sum()
            ),
        },
        "probe": {
            "exact": int(_truthy(pvx.probe_exact).sum()),
            "n": len(pvx),
            "misses": sorted(misses.vocab),
            "specials": sorted(specials.vocab),
            # only inputs llguidance hands tokenize_fn as they are (valid UTF-8) count beyond bug C
            "text": sorted(
                misses[
                    ~_truthy(misses.inexact_only_specials)
                    & (misses.inexact_text.astype(str).str.split("/").str[0].astype(int) > 0)
                ].vocab
            ),
        },
    }


def expected_alternative(t: Tables) -> dict[str, Any]:
    """The PR beside the alternative's candidate, from the compiled tables on llama.cpp's pin."""
    nat = pd.concat([t.native, t.native_candidates], ignore_index=True)
    nat = nat[(nat.llguidance == PINNED) & nat.vocab.isin(t.shipped)]
    alt = "ownbridge"
    vs = sorted(set(nat[nat.sampler == "fixed"].vocab) & set(nat[nat.sampler == alt].vocab))
    if not vs:
        return {}
    sp = t.beyond_special
    sp = sp[(sp.llguidance == PINNED) & sp.vocab.isin(vs) & (sp.steps > 0)]
    s = t.server
    s = s[(s.llguidance == PINNED) & s.vocab.isin(vs) & s.case.isin(PR_CASES)]

    def each(b: str) -> dict[str, Any]:
        x = nat[(nat.sampler == b) & nat.vocab.isin(vs)]
        walked = sp[sp.sampler == b]
        served = s[s.sampler == b]
        return {
            "test_passes": int((x.pr_test_exit == 0).sum()),
            "illegal": int(x.no_space_bad.fillna(0).sum()),
            "not_prefix": int(x.forced_bad.fillna(0).sum()),
            "forcing": sorted(x[x.greedy.astype(str).str.lower().isin(["false", "0"])].vocab),
            "bug_c": sorted(walked[~_truthy(walked.complete)].vocab),
            "bug_c_walked": len(walked),
            "served": len(served),
            "broken": int((served.outcome != "pass").sum()),
        }

    return {"compiled": {"n": len(vs), "pr": each("fixed"), "alt": each(alt)}}


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
        **({"alternative": alt} if (alt := expected_alternative(t)) else {}),
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
    """The check is not a tautology: llama-bpe's bug A figures set to 0 by hand (census and native)
    make the comment's "hits N of M" disagree with the tables."""
    tables = tmp_path / "tables"
    shutil.copytree(REPORTS / "tables", tables)
    census = pd.read_csv(tables / "census.csv", keep_default_na=False, dtype=str)
    census.loc[census.vocab == "llama-bpe", "differing"] = "0"
    census.to_csv(tables / "census.csv", index=False, lineterminator="\n")
    native = pd.read_csv(tables / "native.csv", keep_default_na=False, dtype=str)
    native.loc[(native.vocab == "llama-bpe") & (native.sampler == "upstream"), "no_space_bad"] = "0"
    native.to_csv(tables / "native.csv", index=False, lineterminator="\n")
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


# -- what the comment says about upstream, from the evidence record ------------------------------
RECORD = Path(__file__).resolve().parents[1] / "lib" / "llgbridge" / "upstream.json"
SERIES = ("0001", "0002", "0003")
PR_FILES = ("common/llguidance.cpp", "tests/test-grammar-llguidance.cpp", "tests/CMakeLists.txt", "include/llama.h")


def _blob(path: Path) -> str:
    """git's blob id of a file, computed here (`git hash-object`'s definition)."""
    import hashlib

    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def expected_upstream(record: dict[str, Any], tree: Path) -> dict[str, Any]:
    """The tested claim's and the asks' premises, from the record and the tested tree's own bytes."""
    same = [f for f in PR_FILES if (tree / f).is_file() and _blob(tree / f) == record["files"][f]["base"]]
    pr = [k for k in record["patches"] if k[:4] in SERIES]
    at = {w: all(record["patches"][k][w]["applies"] for k in pr) for w in ("base", "master")}
    cites = record["citations_at_base"]
    returns = record["init_llg_returns"]
    return {
        "tested": {
            "same": sorted(same),
            "applies_base": at["base"],
            "applies_master": at["master"],
            "bridge_at_master": record["files"]["common/llguidance.cpp"]["base"]
            == record["files"]["common/llguidance.cpp"]["master"],
            "cited": sum(bool(c["holds"]) for c in cites),
            "citations": len(cites),
            "base": record["base"]["commit"][:8],
            "master": record["history"]["master"]["commit"][:8],
        },
        "asks": {
            "rebase": not at["master"],
            "never_null": bool(returns) and all(r.startswith("return llama_sampler_init(") for r in returns),
        },
    }


def upstream_disagreements(claims: dict[str, dict[str, Any]], record: dict[str, Any], tree: Path) -> list[str]:
    want = expected_upstream(record, tree)
    t = dict(claims["tested"]["values"])
    t["same"] = sorted(f for f, _ in t["same"])
    out = _subset(t, want["tested"], "tested")
    asks = claims["asks"]["values"]
    if ("rebase" in asks["asks"]) != want["asks"]["rebase"]:
        out.append(f"asks: rebase {'asked' if 'rebase' in asks['asks'] else 'not asked'}, the record says otherwise")
    if asks["never_null"] != want["asks"]["never_null"]:
        out.append("asks.never_null: the record's returns of llama_sampler_init_llg say otherwise")
    if "init_check" in asks["asks"] and not want["asks"]["never_null"]:
        out.append("asks: init_check asked though llama_sampler_init_llg can return null")
    return out


def _tree() -> Path:
    from llgbridge.analyses.native.builder import SHIPPED

    if not (SHIPPED / "common" / "llguidance.cpp").is_file():
        pytest.fail("the tested tree is not extracted: `make native` (a prerequisite of make test) extracts it")
    return SHIPPED


def test_what_the_comment_says_of_upstream_is_the_records() -> None:
    record = json.loads(RECORD.read_text(encoding="utf-8"))
    assert upstream_disagreements(_claims(), record, _tree()) == []


def test_a_blob_id_changed_by_hand_in_the_record_is_caught() -> None:
    """The record is evidence, not decoration: the base's blob of common/llguidance.cpp edited by
    hand makes the comment's "the same blob at both" disagree with it."""
    record = json.loads(RECORD.read_text(encoding="utf-8"))
    record["files"]["common/llguidance.cpp"]["base"] = "0" * 40
    found = upstream_disagreements(_claims(), record, _tree())
    assert any(x.startswith("tested.same") for x in found), found


def test_a_patch_failing_at_master_in_the_record_asks_for_a_rebase() -> None:
    record = json.loads(RECORD.read_text(encoding="utf-8"))
    first = next(k for k in record["patches"] if k.startswith("0001"))
    record["patches"][first]["master"]["applies"] = False
    found = upstream_disagreements(_claims(), record, _tree())
    assert any("rebase" in x for x in found), found


# -- every figure says the code and version that made it ----------------------------------------
def _pinned_llguidance() -> str:
    """The llguidance the port runs on: the venv's pin in pyproject.toml, which `make setup` installs."""
    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    m = re.search(r'"llguidance==([\w.]+)"', text)
    assert m, "pyproject.toml pins no llguidance"
    return m[1]


def _bench_llguidance() -> str:
    m = re.search(r"^Versions: .*\bllguidance ([\w.]+?)\.?$", (REPORTS / "bench.md").read_text(encoding="utf-8"), re.M)
    assert m, "bench.md names no llguidance version"
    return m[1]


def expected_made_by(claims: dict[str, dict[str, Any]], tables: Path) -> dict[str, dict[str, str]]:
    """Which claims are not the compiled code on llama.cpp's pin, and what made them: the port's
    figures on the venv's llguidance, bench's timing on bench's, the server's on its rows' versions."""
    want: dict[str, dict[str, str]] = {}
    if claims.get("costs", {}).get("values", {}).get("time"):
        want["costs"] = {"code": "port", "llguidance": _bench_llguidance(), "models": "random-weight synthetic models"}
    for key in ("probe", "alternative"):
        if key in claims:
            want[key] = {"code": "port", "llguidance": _pinned_llguidance()}
    if "ignored" in claims:
        s = _read(tables, "server.csv")
        versions = sorted(set(s[s.case == "rejected_schema"].llguidance.astype(str)))
        want["ignored"] = {"code": "server", "llguidance": " and ".join(versions)}
    return want


def made_by_disagreements(claims: dict[str, dict[str, Any]], tables: Path) -> list[str]:
    want = expected_made_by(claims, tables)
    out = []
    for key, c in claims.items():
        got = c.get("made_by") or {}
        if got != want.get(key, {}):
            out.append(f"{key}: made by {got!r}, the tables say {want.get(key, {})!r}")
        elif got and (f"llguidance {got['llguidance']}" not in c["text"] or got["code"] not in c["text"].lower()):
            out.append(f"{key}: its sentence does not say what made it ({got!r})")
    return out


def test_every_figure_says_the_code_and_version_that_made_it() -> None:
    assert made_by_disagreements(_claims(), REPORTS / "tables") == []


def test_a_version_label_changed_by_hand_is_caught() -> None:
    """The mask-cost figure relabelled as llama.cpp's pin, as the comment once had it: caught."""
    claims = _claims()
    if "costs" not in claims or not claims["costs"]["made_by"]:
        pytest.fail("the comment states no mask cost: make bench's snapshot is committed with the reports")
    claims["costs"]["made_by"] = {**claims["costs"]["made_by"], "llguidance": PINNED}
    assert any(x.startswith("costs:") for x in made_by_disagreements(claims, REPORTS / "tables"))


# -- the recommendation, recomputed from the tables ------------------------------------------------
def expected_rules(t: Tables) -> list[bool | None]:
    """The three rules of the call, from the tables by this file's own reading: every vocab bug A
    or B hits is repaired, none is worse with the fix (the compiled test, the forced mask, the
    regex's position 0, the server's cases), the two ctest entries pass; none is measured on an
    input set narrower than the full one (every fixture and real model)."""
    from llgbridge.inputsets import input_sets

    if sorted(t.census.vocab) != sorted(input_sets()["every"]):
        return [None, None, None]
    fx = expected_fixes(t)
    nat = t.native[t.native.llguidance == PINNED]
    up, fixed = nat[nat.sampler == "upstream"].set_index("vocab"), nat[nat.sampler == "fixed"].set_index("vocab")
    worse = [
        v
        for v in fixed.index
        if v in up.index
        and (
            (fixed.loc[v, "pr_test_exit"] != 0 and up.loc[v, "pr_test_exit"] == 0)
            or fixed.loc[v, "no_space_bad"] > up.loc[v, "no_space_bad"]
            or (fixed.loc[v, "forced_bad"] > 0 and up.loc[v, "forced_bad"] == 0)
        )
    ]
    s = t.server
    s = s[(s.llguidance == PINNED) & s.case.isin(PR_CASES)]
    for v, g in s.groupby("vocab"):
        fails = {b: set(g[(g.sampler == b) & (g.outcome != "pass")].case) for b in ("upstream", "fixed")}
        if fails["fixed"] - fails["upstream"]:
            worse.append(str(v))
    return [not fx["broken"], not worse, all(b == 0 for _, b in fx["ctest"].values())]


def test_the_recommendation_follows_from_the_tables() -> None:
    rules = [r["holds"] for r in _claims()["call"]["values"]["rules"]]
    assert rules == expected_rules(Tables(REPORTS / "tables"))
