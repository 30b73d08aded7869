"""The answer for one file: is it hit by bugs A to D, without the PR, with it, and with the
alternative design (candidate 0007, `ownbridge`); what the other engines do on it; what the real
llama-server did, and on which model.

One function (`answer`) computes the answer from a report's tables (`tables/*.csv`, the same files
the cells under it on the page are drawn from), so the block and the tables cannot disagree: the
what-if page opens with it (`answer_section`), `make audit`'s summary has one row of it per file,
and a test recomputes it from the CSVs alone. A bug's cell is measured only where its table has a
row; where it has none the cell says "not measured", never "no".
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from typing import Any

# the three builds of common/llguidance.cpp the answer sets side by side: as shipped, with the PR,
# and llguidance's own bridge design (candidate 0007)
BRIDGES = ("upstream", "fixed", "ownbridge")
SIDES = {"upstream": "without the PR", "fixed": "with the PR", "ownbridge": "ownbridge (candidate 0007)"}
# llama.cpp's pinned llguidance: the compiled code's rows on it are the ones the answer reads (the
# native analysis runs other versions beside it)
PINNED = "1.0.1"
# the server's cases that test something other than the bridge (a GBNF grammar, the chat template,
# a schema llguidance refuses, bug C's literals): the verdict's end-to-end cell leaves them out too
CONTROLS = ("json_enum_gbnf", "json_enum_chat", "rejected_schema", "special_literal", "special_pattern")
NOT = "not measured"

# the summary's columns, in order (audit.py writes them, the what-if page shows them)
COLUMNS = (
    "family",
    "n_tokens",
    "add_space_prefix",
    "detokenize",
    "end_tokens",
    "a_tokens",
    *(f"{bug}_{b}" for bug in ("a", "b", "c", "d") for b in BRIDGES),
    "b_tokenize_exact",
    "engines",
    *(f"server_{b}" for b in BRIDGES),
    "server_dropped",
    "server_model",
    "server_weights",
)


def read(tables: Path, name: str) -> list[dict[str, str]] | None:
    """A table's rows as text, or None where the report has no such table (its analysis did not run)."""
    p = tables / f"{name}.csv"
    if not p.exists():
        return None
    with p.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def _pinned(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """The rows on llama.cpp's pinned llguidance where any are, else those on the first version named."""
    versions = sorted({r.get("llguidance", "") for r in rows})
    pick = PINNED if PINNED in versions else (versions[0] if versions else "")
    return [r for r in rows if r.get("llguidance", "") == pick]


def _one(rows: list[dict[str, str]] | None, key: str, value: str) -> dict[str, str] | None:
    return next((r for r in rows or [] if r.get(key) == value), None)


def bug_a(leak: list[dict[str, str]] | None, bridge: str) -> str:
    """Illegal tokens the bridge's mask admits at the leak test's first position."""
    r = _one(leak, "bridge", bridge)
    if r is None:
        return NOT
    return "not built" if r.get("build_error") else r["allowed_illegal"]


def bug_b(forced: list[dict[str, str]] | None, bridge: str) -> str:
    """What the bridge does along the forced literal: the matcher dies (the grammar is dropped), a
    token that is not a prefix is allowed, the output is wrong, or none of these ("no")."""
    r = _one(forced, "bridge", bridge)
    if r is None:
        return NOT
    if r.get("build_error"):
        return "not built"
    if r.get("error"):
        return "grammar dropped"
    if r.get("not_prefix") not in ("", "0"):
        return f"{r['not_prefix']} not a prefix"
    if r.get("output_ok") == "False":
        return "wrong output"
    return "no"


def bug_c(special: list[dict[str, str]] | None, bridge: str) -> str:
    """The end-of-turn token's text as a grammar literal, walked through the compiled sampler: spelled
    whole ("no"), or the walk stopped short ("hits")."""
    r = _one(_pinned(special or []), "sampler", bridge)
    if r is None:
        return NOT
    if r.get("complete") == "True":
        return "no"
    return "hits" if r.get("steps") not in ("", "0") else NOT


def bug_d(native: list[dict[str, str]] | None, aborts: list[dict[str, str]] | None, bridge: str) -> str:
    """A mask over llguidance's item limit met on the compiled harness or a walk ("hits"), where
    the compiled sampler ran at all."""
    if _one(native, "sampler", bridge) is None:
        return NOT
    hit = [r for r in aborts or [] if r.get("bridge") == bridge and r.get("limit")]
    return "hits" if hit else "no"


def engines(rows: list[dict[str, str]] | None) -> str:
    """Each other engine and the bug classes its own llama.cpp integration shows on the file."""
    if rows is None:
        return NOT
    said = []
    for r in sorted(rows, key=lambda r: r["engine"]):
        if r.get("error") and not r.get("bug_a"):
            said.append(f"{r['engine']}: did not run")
            continue
        hit = [bug.upper() for bug in ("a", "b", "c") if r.get(f"bug_{bug}") == "yes"]
        said.append(f"{r['engine']}: {', '.join(hit) if hit else 'none'}")
    return "; ".join(said)


def served(rows: list[dict[str, str]] | None) -> list[dict[str, str]]:
    """The server's requests the answer counts: on the pinned llguidance, the controls left out."""
    return [r for r in _pinned(rows or []) if r.get("case") not in CONTROLS]


def answer(tables: Path) -> dict[str, str]:
    """The answer's columns (`COLUMNS`) for the one input of the report whose tables are in `tables`."""
    census = read(tables, "census") or []
    c = census[0] if census else {}
    leak, forced = read(tables, "leak"), read(tables, "forced")
    special = read(tables, "beyond_special")
    native = (read(tables, "native") or []) + (read(tables, "native_candidates") or [])
    aborts = read(tables, "bug_d")
    probe = read(tables, "probe")
    server = served(read(tables, "server"))
    row: dict[str, str] = {
        "family": f"{c['vocab_type']} ({c['tokenizer_model']}{', pre ' + c['pre'] if c.get('pre') else ''})"
        if c
        else NOT,
        "n_tokens": c.get("n_tokens", ""),
        "add_space_prefix": (
            f"the file's key {c['add_space_prefix_kv'].lower() or 'absent'}; llama_tokenize "
            + ("prepends a space" if c["add_space_prefix_observed"] == "True" else "prepends none")
        )
        if c
        else NOT,
        # the two passes of llama_detokenize that drop a leading space (bug A's mechanisms), measured
        "detokenize": (
            f"lstrip {'on' if c['detok_lstrip'] == 'True' else 'off'}, "
            f"clean_spaces {'on' if c['detok_clean_spaces'] == 'True' else 'off'}"
        )
        if c
        else NOT,
        "end_tokens": _end_tokens(c, native),
        "a_tokens": c.get("differing", NOT) if c else NOT,
        "b_tokenize_exact": ("yes" if probe[0]["tokenize_exact"] == "True" else "no") if probe else NOT,
        "engines": engines(read(tables, "engines")),
    }
    for b in BRIDGES:
        row[f"a_{b}"] = bug_a(leak, b)
        row[f"b_{b}"] = bug_b(forced, b)
        row[f"c_{b}"] = bug_c(special, b)
        row[f"d_{b}"] = bug_d(native, aborts, b)
        mine = [r for r in server if r["sampler"] == b]
        row[f"server_{b}"] = f"{sum(r['outcome'] == 'pass' for r in mine)}/{len(mine)}" if mine else NOT
    up = [r for r in server if r["sampler"] == "upstream"]
    # dropped: a request the shipped server answered 200 with no error field and a grammar broken
    silent = [r for r in up if r["outcome"] != "pass" and r["http_status"] == "200" and r["error_field"] != "True"]
    row["server_dropped"] = f"{len(silent)} of {len(up)}" if up else NOT
    models = sorted({r["model"] for r in server})
    row["server_model"] = ", ".join(models) if models else NOT
    synthetic = {r["synthetic"] for r in server}
    row["server_weights"] = (
        NOT
        if not server
        else "random-weight stand-in"
        if synthetic == {"True"}
        else "the file's own weights"
        if synthetic == {"False"}
        else "both"
    )
    return {k: row[k] for k in COLUMNS}


def _end_tokens(c: dict[str, str], native: list[dict[str, str]]) -> str:
    """The file's BOS and EOS ids (the census), and the end token the shipped bridge hands llguidance."""
    if not c:
        return NOT
    up = _one(_pinned(native), "sampler", "upstream")
    eos = "none" if c["eos"] in ("", "-1") else c["eos"]
    said = f"eos {eos}, bos {c['bos'] if c['bos'] not in ('', '-1') else 'none'}"
    if up is not None:
        said += f"; handed to llguidance: {'none (-1)' if up['tok_eos'] == '-1' else up['tok_eos']}"
    return said


def hits(cell: str) -> bool:
    """Whether a bug's cell says the bug shows."""
    return cell not in ("no", "0", NOT, "not built", "")


def shown_bridges(row: dict[str, str]) -> list[str]:
    """The builds the answer shows: ownbridge's column only where something of it was measured."""
    return [b for b in BRIDGES if b != "ownbridge" or any(row[f"{x}_{b}"] != NOT for x in ("a", "b", "c", "d"))]


def number(cell: str) -> str:
    """A count as the page says it (31,985), any other cell as it is."""
    return f"{int(cell):,}" if cell.isdigit() else cell


def bug_table(row: dict[str, str]) -> list[dict[str, str]]:
    """The answer's table: a row per bug and one for the server, a column per build."""
    a_note = (
        f" ({number(row['a_tokens'])} tokens with wrong bytes in the shipped table)" if row["a_tokens"] != NOT else ""
    )
    labels = {
        "a": "Bug A: illegal tokens admitted" + a_note,
        "b": f"Bug B: along a forced literal (llama_tokenize exact: {row['b_tokenize_exact']})",
        "c": "Bug C: an end token's text in a grammar ends generation",
        "d": "Bug D: llguidance's item limit drops the grammar",
        "server": f"llama-server: cases passed ({row['server_weights']})",
    }
    out = []
    for key, label in labels.items():
        out.append({"": label, **{SIDES[b]: number(row[f"{key}_{b}"]) for b in shown_bridges(row)}})
    return out


def said(row: dict[str, str], file: str, flags: str = "") -> list[str]:
    """The answer's sentences (Markdown; `file`, a name from the user, already a code span; `flags`,
    the overrides it is loaded with, as code spans)."""
    lines = [
        f"{file}{' loaded with ' + flags if flags else ''}: tokenizer {row['family']}, {number(row['n_tokens'])} "
        f"tokens; add_space_prefix: {row['add_space_prefix']}; llama_detokenize: {row['detokenize']}; end tokens: "
        f"{row['end_tokens']}.",
    ]
    if row["server_weights"] == NOT:
        lines.append("The real llama-server was not run on this file.")
    else:
        on = (
            "a **random-weight stand-in** around this file's tokenizer, not the file's weights "
            "(`make audit MODELS=file.gguf SERVER=1` serves the file's own weights, as `make matrix "
            "MODELS=file.gguf` runs the matrix on them: not by default, as a model's weights take "
            "minutes to serve where its vocab takes seconds)"
            if row["server_weights"] == "random-weight stand-in"
            else "the file's own weights"
        )
        lines.append(
            f"The server ran on {on}; without the PR it answered HTTP 200 with no error field and the grammar "
            f"broken in {row['server_dropped']} requests."
        )
    lines.append(f"Other engines, the bug classes their own llama.cpp integration shows here: {row['engines']}.")
    return lines


def changes(with_row: dict[str, str], without_row: dict[str, str], flags: str) -> list[str]:
    """What an override changed, in words: each of the answer's cells that moved, said as a sentence
    (the cell-by-cell diff of every table is under it, collapsed)."""
    # (column, its sentence with the overridden value in {}, how a value is written)
    said: list[tuple[str, str, Callable[[str], str]]] = [
        ("a_tokens", "bug A's shipped token table has {} tokens with wrong bytes", number),
        *[
            (f"{key}_{b}", f"{what} {SIDES[b]}: {{}}", number)
            for key, what in (("a", "bug A (illegal tokens admitted)"), ("b", "bug B"), ("c", "bug C"), ("d", "bug D"))
            for b in BRIDGES
        ],
        ("server_dropped", "the shipped server drops the grammar silently in {} requests", str),
        *[(f"server_{b}", f"the server {SIDES[b]} passes {{}} cases", str) for b in BRIDGES],
        ("b_tokenize_exact", "llama_tokenize exact: {}", str),
    ]
    out = [
        f"{text.format(fmt(with_row[col]))} (without it, {fmt(without_row[col])})"
        for col, text, fmt in said
        if with_row[col] != without_row[col]
    ]
    if not out:
        return [f"With {flags}, none of the answer's cells moved."]
    return [f"With {flags}: " + "; ".join(out) + "."]


def answer_section(tables: Path, file: str, flags: str = "") -> Any:
    """The what-if's first section: the answer for the file (loaded with `flags`, the overrides as
    code spans), from this render's `tables`."""
    # the page's types, with pandas: the audit's summary reads the answer without them
    import pandas as pd

    from .report.gfm import code_span  # the report is loaded with pandas, above
    from .report.table import Section, Table  # likewise

    row = answer(tables)
    sec = Section("answer", "The answer for this file")
    sec.text = "\n\n".join(said(row, code_span(file), flags)) + "\n"
    sec.views.append(Table(pd.DataFrame(bug_table(row))))
    return sec
