"""What if: every per-vocab analysis on a GGUF file of your own, in a report of its own.

    python -m llgbridge.whatif path/to/file.gguf [--name NAME] [-p NAME VALUE ...] [--override KEY=TYPE:VALUE ...]
    make whatif VOCAB=path/to/file.gguf [PARAMS='-p grammar "start: /[a-z]+/"'] [OVERRIDE="KEY=TYPE:VALUE ..."]

Runs the census, leak, forced-mask, probe, exactness, soundness and native notebooks on the file,
and the matrix and the real llama-server on a synthetic model made from its tokenizer, then
writes a self-contained report under `reports/whatif/NAME-KEY/` (KEY: the file's sha256 and the
overrides; index.html, pr-review-tables.md, tables/*.csv, the executed notebooks).
The main report is not touched. A `-p` parameter goes to every notebook that has it.

With llama.cpp's key overrides (`OVERRIDE`, as `--override-kv` takes them), every analysis loads
the file with them, and the same analyses run on the file without them too (`NAME/without/`, a
report of its own), so the page can say what the overrides changed: which tables moved, and how.
The input is named after them (`mine+add_space_prefix-true`), so it never takes the plain file's
name, results or synthetic model. A what-if page quotes only what it computed: no `make bench`
snapshot of the main report.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

from . import analyses, run
from . import params as P
from .answer import answer, answer_section, changes
from .errors import InputError
from .gguf_meta import check_tokenizer, read_kv
from .inputs import Input
from .overrides import Override, model_label, parse_all, suffix, tag
from .paths import DATA, REPORTS, name_problem, usable_name, vocab_name
from .pool import Stopped, stop_on_signals
from .results import file_sha256
from .vocab import check_gguf_file

# native: llama.cpp's own test and the port against the compiled sampler, on this vocab; server: the
# real llama-server on the synthetic model the matrix builds (both skipped with one line where
# nothing could be compiled)
ANALYSES = analyses.names(whatif=True)


def notebook_parameters(notebook: str) -> set[str]:
    """Names assigned in a notebook's tagged parameters cell."""
    return set(P.declared(notebook))


def safe_name(path: Path) -> str:
    """The report's name for a file given without --name: the name it was given by (a link's own
    name, not its target's: a link to a fixture must not take the fixture's name and write over its
    report), every character an input name cannot hold replaced (`my vocab:2.gguf` ->
    `my_vocab_2`), a letter outside ASCII spelled as its code point (`模型.gguf` -> `u6a21u578b`)."""
    spelled = "".join(c if c.isascii() else f"u{ord(c):04x}" for c in vocab_name(path))
    name = usable_name(spelled).lstrip("-._") or "vocab"
    return name[:128]


def chosen(names: str) -> tuple[str, ...]:
    """The what-if's analyses: those `names` lists (split on spaces; every one of the registry's
    what-if analyses when empty), in the registry's order; InputError naming one it does not run."""
    asked = names.replace(",", " ").split()
    unknown = [n for n in asked if n not in ANALYSES]
    if unknown:
        raise InputError("ANALYSES", f"{' '.join(unknown)}: a what-if runs {', '.join(ANALYSES)}")
    return tuple(n for n in ANALYSES if not asked or n in asked)


def _plan(
    it: Input, params: dict[str, object], models_dir: Path, names: tuple[str, ...] = ANALYSES
) -> list[tuple[str, dict[str, object]]]:
    """(notebook, parameters) for each of `names` on input `it`, each checked: every refusal before a
    kernel starts."""
    accepted = {n: notebook_parameters(n) for n in names}
    for key in params:
        if not any(key in accepted[n] for n in names):
            raise InputError(f"parameter {key}", f"no analysis notebook takes it ({', '.join(names)})")
    runs = []
    for nb in names:
        p = {k: v for k, v in params.items() if k in accepted[nb]}
        if "models_dir" in accepted[nb]:  # its synthetic model goes beside the what-if's results
            p["models_dir"] = str(models_dir)
        P.check(nb, {"input": it.param(), **p})
        runs.append((nb, p))
    return runs


def folder(path: Path, name: str, ovs: tuple[Override, ...]) -> str:
    """The what-if's folder: its name, then a key of what it is (the file's sha256 and the
    overrides), so two what-ifs whose names collide (`general.name=str:a b` and `str:a_b` both name
    `+name-a_b`; two files called mine.gguf) never share a folder, results or synthetic model."""
    # the sha256 provenance records for the same file (cached by size and time)
    what = "\n".join([file_sha256(path), *(o.text for o in ovs)])
    return f"{name}-{hashlib.sha256(what.encode()).hexdigest()[:12]}"


def _only_one(out: Path) -> IO[str]:
    """`out`'s lock, taken (its file holds this process's id): the same what-if run twice at once
    is refused in one line naming the process that holds it. Released when the file closes."""
    out.mkdir(parents=True, exist_ok=True)
    f = (out / ".lock").open("a+", encoding="utf-8")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        pid = f.read().strip() or "unknown"
        f.close()
        raise InputError(
            out, f"the same what-if (this file, these overrides) is running in process {pid}; wait for it to end"
        ) from None
    f.seek(0)
    f.truncate()
    f.write(f"{os.getpid()}\n")
    f.flush()
    return f


# two workers, each one kernel and one load of the file: the analyses of the vocab on one, the
# matrix and the server (the synthetic model the matrix makes, then the servers on it) on the other;
# on 32k tokens the two take about as long
WORKERS = 2


def _groups(runs: list[tuple[str, dict[str, object]]]) -> list[list[str]]:
    on_models = {a.name for a in analyses.ANALYSES if a.runs_on != "every"}
    names = [nb for nb, _ in runs]
    return [g for g in ([n for n in names if n not in on_models], [n for n in names if n in on_models]) if g]


def _run_all(
    sides: list[tuple[Input, list[tuple[str, dict[str, object]]], Path]],
    say: Callable[[str], None] = lambda line: print(line, flush=True),
) -> list[list[run.RunStatus]]:
    """Every analysis of every side (its input, its runs, its report folder) on one pool
    (`batch.run_pool`), each side in two groups (`_groups`) run side by side where the machine has
    the cores: each worker loads a file and builds its bridges once per group (its kernel's output
    goes to a log meanwhile; each run's line goes to the terminal as it ends). An overridden file's
    two sides share the workers, so neither waits for the other's slowest group. Each side's
    statuses come back in the registry's order, each with its wall."""
    from . import batch  # here, not at the top: a refused what-if answers before pandas is loaded

    jobs: list[tuple[str | Input, list[str]]] = []
    where: list[batch.Where] = []
    for it, runs, out in sides:
        for g in _groups(runs):
            jobs.append((it, g))
            where.append({"out": out, "results": out / "results", "params": dict(runs)})
    workers = max(1, min(WORKERS, len(jobs), len(os.sched_getaffinity(0))))
    say(
        f"[whatif {' and '.join(it.name for it, _, _ in sides)}] {sum(len(r) for _, r, _ in sides)} analyses "
        f"on {workers} worker(s) ..."
    )
    statuses, _ = batch.run_pool(
        jobs,
        workers,
        places=batch.Places(results=sides[0][2] / "results", out_root=sides[0][2]),
        say=say,
        where=where,
    )
    got = []
    for it, runs, _ in sides:
        order = [nb for nb, _ in runs]
        got.append(
            sorted((st for st in statuses if st["vocab"] == it.name), key=lambda st: order.index(str(st["notebook"])))
        )
    return got


@dataclass(frozen=True)
class _Input:
    """What a what-if runs on: `input`, the file (resolved) under the name its report takes, with
    llama.cpp's key overrides every load takes; `base`, the same file without them under the name
    it was given by (the other side of a what-if with overrides)."""

    input: Input
    base: Input

    @property
    def path(self) -> Path:
        return Path(self.input.file)

    @property
    def name(self) -> str:
        return self.input.name

    @property
    def plain(self) -> str:
        return self.base.name

    @property
    def ovs(self) -> tuple[Override, ...]:
        return self.input.overrides


def _input(path: Path, name: str | None, overrides: list[str], weights: bool = False) -> _Input:
    """`path` checked (a GGUF file, its tokenizer's header), with its name and overrides: InputError
    for a file that is not GGUF, a NAME that could not name a folder, an override llama.cpp's
    syntax refuses. With `weights`, the matrix and the server run on the file itself (its own
    weights) instead of a synthetic model around its tokenizer."""
    check_gguf_file(path)
    # the census's header check, before the pool starts: a truncated file is one line, not 18 failed runs
    check_tokenizer(path, read_kv(path)[0])
    given = bool(name)
    ovs = parse_all(overrides)
    plain = safe_name(path)  # the name it was given by: a link's own, not its target's
    path = path.resolve()
    name = name or (plain + suffix(ovs))[:128]
    why = name_problem(name)
    if why:
        raise InputError("NAME" if given else path, why)
    if ovs and plain == name:
        raise InputError("NAME", f"{name!r} is the plain file's name: an input loaded with overrides needs its own")
    # made once here, the overrides checked against the file's header; every run gets these values
    models = (str(path),) if weights else ()
    return _Input(Input.make(name, str(path), models, overrides=ovs), Input.make(plain, str(path), models))


def whatif(
    path: Path,
    name: str | None = None,
    params: dict[str, object] | None = None,
    out: Path | None = None,
    models_dir: Path | Literal["weights"] | None = None,
    overrides: list[str] | None = None,
    one_pool: bool = True,
    names: tuple[str, ...] = ANALYSES,
) -> list[run.RunStatus]:
    """Run every analysis (or those `names`) on `path`; the report goes to `out` (default
    reports/whatif/NAME-KEY, `folder`).

    With llama.cpp's key `overrides` (KEY=TYPE:VALUE), every load takes them, the same analyses
    run on the file without them too (`out/without/`), and the page says what they changed
    (`override_section`). The statuses returned are the overridden run's. Both sides share one
    pool of workers; `one_pool=False` runs them one after the other, each on a pool of its own, as
    before (`make bench` times both). `models_dir` is where the synthetic model the matrix and the
    server run on goes, or "weights": they run on the file itself (its own weights).

    InputError, before anything runs, for a file that is not GGUF, a NAME that could not name a
    folder (`../..`), an override llama.cpp's syntax refuses, or a parameter no notebook takes or
    one that takes it refuses.
    """
    # "weights": the matrix and the server run on the file itself, no synthetic model made (make audit)
    weights = models_dir == "weights"
    it = _input(path, name, overrides or [], weights)
    where = folder(it.path, it.name, it.ovs)
    out = out or REPORTS / "whatif" / where
    params = params or {}
    models = DATA / "whatif" / where / "models" if models_dir is None or weights else Path(models_dir)
    runs = _plan(it.input, params, models, names)
    base = _plan(it.base, params, models / "without", names) if it.ovs else []
    held = _only_one(out)  # noqa: F841 - the lock is held until this returns and its file closes
    run.fast_imports()
    t0 = time.monotonic()
    sides = [(it.input, runs, out)] + ([(it.base, base, out / "without")] if it.ovs else [])
    statuses, *rest = _run_all(sides) if one_pool else [_run_all([side])[0] for side in sides]
    wall = time.monotonic() - t0
    plain_statuses = rest[0] if it.ovs else []
    _pages(it, out, plain_statuses)
    # the plain run's failures are said too: its tables are what the page compares against
    statuses += [
        {**st, "notebook": f"{st['notebook']} (without the overrides)"} for st in plain_statuses if st["status"] != "ok"
    ]
    server_s = _server_wall(statuses) + _server_wall(plain_statuses)
    how = (", both sides on one pool" if one_pool else ", one side after the other") if it.ovs else ""
    print(
        f"what-if: {wall:.0f} s{how}"
        f" (the server analys{'es of both sides' if it.ovs else 'is'}: {server_s:.0f} s of the workers' time)"
    )
    return statuses


def _pages(it: _Input, out: Path, plain_statuses: list[run.RunStatus]) -> None:
    """The what-if's report in `out`; with overrides, the plain file's in `out/without/` first and
    the section that sets the two against each other leading the page."""
    from . import report  # here, once the runs are made: a refused what-if answers without it

    if it.ovs:
        # the plain file's report first: its tables are what the overridden one's are set against,
        # once that render has written them
        report.write_report(
            out / "without" / "results",
            out / "without",
            bench_csv=out / "without" / "bench.csv",
            lead=lambda tables: [answer_section(tables, it.path.name)],
            subject={"file": it.path.name, "name": it.plain, "overrides": []},
        )

    from .report.gfm import code_span  # with the report, loaded once the runs are made

    def lead(tables: Path) -> list[Any]:
        # the answer first, from this render's own tables (the cells under it); then, with
        # overrides, what they changed: in words, the cell-by-cell diff collapsed beneath
        if not it.ovs:
            return [answer_section(tables, it.path.name)]
        flags = " ".join(code_span(f"--override-kv {o.text}") for o in it.ovs)
        moved = changes(answer(tables), answer(out / "without" / "tables"), flags)
        return [
            answer_section(tables, it.path.name, flags),
            override_section(out, tables, it.name, it.plain, it.path, it.ovs, moved),
        ]

    # a what-if quotes only what it computed: its own (absent) bench snapshot, never the main report's
    subject = {"file": it.path.name, "name": it.name, "overrides": [o.text for o in it.ovs]}
    report.write_report(out / "results", out, bench_csv=out / "bench.csv", lead=lead, subject=subject)
    print(
        f"what-if report: {out / 'index.html'}"
        + (f" (the file without the overrides: {out / 'without' / 'index.html'})" if it.ovs else "")
    )


def _server_wall(statuses: list[run.RunStatus]) -> float:
    """Seconds the server analysis ran (the longest part of a what-if), from its status's timing."""
    return sum(float((st.get("timing") or {}).get("wall", 0.0)) for st in statuses if st.get("notebook") == "server")


# the columns that say which row a table's row is (the rest are what was measured)
ID_COLUMNS = (
    "analysis",
    "input",
    "vocab",
    "real_model",
    "model",
    "synthetic",
    "prompt",
    "case",
    "bridge",
    "sampler",
    "llguidance",
    "endpoint",
    "sent_as",
    "test",
    "job",
    "step",
    "what",
    "schema",
    "mechanism",
    "literal",
)
MAX_SHOWN = 40  # changed cells listed per table; the CSV has them all
# the cells a reader looks for first when a table moved: what the bugs and the fix do, upstream first
HEADLINE = (
    "differing",
    "lost_leading_space",
    "allowed_with_space",
    "allowed_illegal",
    "not_prefix",
    "output_ok",
    "outcome",
    "tokenize_exact",
    "greedy",
    "pr_test_exit",
    "shipped_test_exit",
    "no_space_bad",
    "forced_bad",
    "under",
    "error",
)


def _frame(p: Path) -> Any:
    import pandas as pd

    return pd.read_csv(p, dtype=str, keep_default_na=False)


def table_changes(
    with_dir: Path, without_dir: Path, rename: dict[str, str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(one row per table: rows compared, rows and cells that moved; one row per moved cell), the
    overridden report's tables (`with_dir/*.csv`) against the plain file's (`without_dir`), its
    names mapped to the overridden ones (`rename`) so the same row meets itself."""
    summary: list[dict[str, Any]] = []
    cells: list[dict[str, Any]] = []
    for p in sorted(with_dir.glob("*.csv")):
        q = without_dir / p.name
        if not q.exists():
            summary.append(_one_sided(p.stem, "only with the override"))
            continue
        a, b = _frame(p), _frame(q)
        for col in (c for c in ID_COLUMNS if c in b):
            b[col] = b[col].map(lambda x: rename.get(x, x))
        row, moved = _compare(p.stem, a, b)
        summary.append(row)
        cells += moved
    for q in sorted(without_dir.glob("*.csv")):
        if not (with_dir / q.name).exists():
            summary.append(_one_sided(q.stem, "only without the override"))
    return summary, cells


def _one_sided(table: str, how: str) -> dict[str, Any]:
    """The summary row of a table only one side has."""
    return {"table": table, "rows": "", "rows changed": "", "cells changed": "", "how": how}


def _compare(table: str, a: Any, b: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(its summary row, its moved cells): one table with the overrides (`a`) against the same
    table without them (`b`), row by row where the key columns name each row alone."""
    keys = [c for c in ID_COLUMNS if c in a and c in b]
    values = [c for c in a.columns if c in b.columns and c not in keys]
    ka = {tuple(r[k] for k in keys): r for _, r in a.iterrows()}
    kb = {tuple(r[k] for k in keys): r for _, r in b.iterrows()}
    if len(ka) != len(a) or len(kb) != len(b):  # no key names a row alone: the rows as a whole
        sa, sb = sorted(map(tuple, a.values.tolist())), sorted(map(tuple, b.values.tolist()))
        moved = len(set(sa) ^ set(sb))
        how = "rows differ" if moved else "unchanged"
        return {
            "table": table,
            "rows": f"{len(b)} / {len(a)}",
            "rows changed": moved,
            "cells changed": "",
            "how": how,
        }, []
    rows_moved, n_cells, cols, cells = 0, 0, [], []
    # a row is named by the key columns that tell its table's rows apart (the input's name is the same in all)
    vary = [i for i, c in enumerate(keys) if len({*a[c], *b[c]}) > 1]
    for k in sorted(set(ka) | set(kb)):
        ra, rb = ka.get(k), kb.get(k)
        where = " · ".join(k[i] for i in vary if k[i])
        if ra is None or rb is None:
            rows_moved += 1
            cells.append(
                {
                    "table": table,
                    "row": where,
                    "column": "(row)",
                    "without": "present" if rb is not None else "absent",
                    "with": "present" if ra is not None else "absent",
                }
            )
            continue
        diff = [c for c in values if ra[c] != rb[c]]
        rows_moved += bool(diff)
        n_cells += len(diff)
        cols += [c for c in diff if c not in cols]
        cells += [
            {"table": table, "row": where, "column": c, "without": rb[c][:120], "with": ra[c][:120]} for c in diff
        ]
    how = ", ".join(cols[:8]) + ("…" if len(cols) > 8 else "") if rows_moved else "unchanged"
    return {"table": table, "rows": len(a), "rows changed": rows_moved, "cells changed": n_cells, "how": how}, cells


def visible(value: str) -> str:
    """A cell's value as the summary says it: a blank is "(blank)", and a text with a space at
    either end is quoted in a code span, so a space the override added or removed shows."""
    if value == "":
        return "(blank)"
    if value != value.strip():
        from .report.gfm import code_span  # the report is loaded only once the runs are made

        return code_span(repr(value))
    return value


def moved_items(moved: list[dict[str, Any]], cells: list[dict[str, Any]]) -> list[str]:
    """One line per moved table: its first cells that moved, the headline columns first."""
    items = []
    for r in moved:
        mine = sorted(
            (c for c in cells if c["table"] == r["table"]),
            key=lambda c: (
                HEADLINE.index(c["column"]) if c["column"] in HEADLINE else len(HEADLINE),
                "upstream" not in c["row"],
            ),
        )
        shown = "; ".join(
            f"{c['column']} {visible(c['without'])} → {visible(c['with'])}" + (f" ({c['row']})" if c["row"] else "")
            for c in mine[:3]
        )
        more = len(mine) - 3
        head = (
            f"`{r['table']}` ({r['rows changed']} of {r['rows']} rows): "
            if r["cells changed"] != ""
            else f"`{r['table']}`: "
        )
        items.append(head + (shown or r["how"]) + (f"; and {more} more cells ({r['how']})" if more > 0 else ""))
    return items


def _how_many(summary: list[dict[str, Any]], moved: list[dict[str, Any]], compared: list[dict[str, Any]]) -> str:
    """How many of the tables both sides wrote moved, in a sentence."""
    if not summary:
        return "Neither run wrote a table to compare."
    if not moved:
        return (
            f"None of the {len(compared)} tables both sides wrote moved: on this file the override changes nothing the "
            f"suite measures there."
        )
    n = len(compared)
    return (
        f"{len(moved)} of the {n} tables both sides wrote moved" if len(moved) < n else f"All {n} tables moved"
    ) + ", row by row against the plain file's (a row is the same input, bridge, case or build on both sides)."


def override_section(
    out: Path,
    tables: Path,
    name: str,
    plain: str,
    path: Path,
    ovs: tuple[Override, ...],
    words: list[str] | None = None,
) -> Any:
    """The what-if's section after the answer: what the overrides changed (`tables`, this render's
    tables) against the same file without them (`out/without/`): in `words` first (`answer.changes`),
    then how many tables moved; table by table and cell by cell in `more`, which the page shows
    collapsed."""
    # with pandas: not loaded for a refused what-if
    import pandas as pd

    from .report.gfm import code_span  # the report, likewise
    from .report.table import Section, Table  # likewise

    # the same row on both sides: the input's name, and the synthetic model's (its own file, loaded with the overrides)
    models = {f"synthetic-{plain}.gguf": model_label(f"synthetic-{name}+kv-{tag(ovs)}.gguf", ovs)}
    summary, cells = table_changes(tables, out / "without" / "tables", {plain: name, **models})
    moved = [r for r in summary if r["rows changed"] not in ("", 0)]
    # a table one side wrote and the other did not is not compared: it is said apart, never counted as moved
    one_side = [r for r in summary if r["rows"] == ""]
    compared = [r for r in summary if r["rows"] != ""]
    flags = " ".join(f"`--override-kv {o.text}`" for o in ovs)
    sec = Section("override", "What the override changed")
    said = [
        *(words or []),
        f"{code_span(name)} is {code_span(path.name)} loaded with {flags}; {code_span(plain)} is the same file "
        f"without {'it' if len(ovs) == 1 else 'them'} ([its own report](without/index.html)), every analysis run on "
        "both.",
    ]
    said.append(_how_many(summary, moved, compared))
    detail = ["\n".join(f"- {x}" for x in moved_items(moved, cells))] if moved else []
    if one_side:
        detail.append(
            "Written on one side only, so not compared: "
            + ", ".join(f"`{r['table']}` ({r['how']})" for r in one_side)
            + "."
        )
    sec.text = "\n\n".join(said) + "\n"
    sec.more = "\n\n".join(detail) + "\n" if detail else ""
    sec.views.append(Table(pd.DataFrame(summary), "Every table, with the override against without", collapsed=True))
    if cells:
        shown_cells = pd.DataFrame(cells)
        shown_cells = pd.concat([g.head(MAX_SHOWN) for _, g in shown_cells.groupby("table", sort=True)]).reset_index(
            drop=True
        )
        sec.views.append(
            Table(
                shown_cells,
                f"The cells that moved (at most {MAX_SHOWN} a table; tables/override_changes.csv has all)",
                collapsed=True,
            )
        )
        sec.raw_table("override_changes", pd.DataFrame(cells))
    return sec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", type=Path)
    ap.add_argument("--name", default=None)
    ap.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    ap.add_argument(
        "--params", default="", help="-p options as one string, split as a shell would (make whatif PARAMS=...)"
    )
    ap.add_argument(
        "--override",
        default="",
        help="llama.cpp key overrides, KEY=TYPE:VALUE, as a shell would split them (make whatif OVERRIDE=...)",
    )
    ap.add_argument("--analyses", default="", help="only these analyses, split on spaces (make whatif ANALYSES=...)")
    # make audit's: where the report and the synthetic models go, and the server on the file's weights
    ap.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--models-dir", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--weights", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    try:
        # split here, never by a shell: PARAMS and OVERRIDE come from the user's command line
        extra = shlex.split(a.params)
        if len(extra) % 3 or any(extra[i] != "-p" for i in range(0, len(extra), 3)):
            raise InputError("PARAMS", f"expected -p NAME VALUE ..., got {a.params!r}")
        pairs = [*a.p, *((extra[i + 1], extra[i + 2]) for i in range(0, len(extra), 3))]
        kv = [P.from_argv(x) for x in shlex.split(a.override)]
        with stop_on_signals():
            given = {k: P.parse_value(v) for k, v in pairs}
            statuses = whatif(
                a.path,
                a.name or None,
                given,
                out=a.out,
                models_dir="weights" if a.weights else a.models_dir,
                overrides=kv,
                names=chosen(a.analyses),
            )
    except ValueError as e:  # InputError, or shlex's unbalanced quote
        print(f"whatif: {e}", file=sys.stderr)
        return 2
    except Stopped as e:  # the workers, their kernels and servers are gone; no page is drawn
        print(f"whatif: {e}: every worker ended; no report written", file=sys.stderr)
        return 128 + e.signum
    failed = [s for s in statuses if s["status"] != "ok"]
    for s in failed:
        print(f"FAILED {s['notebook']}: {s['error']}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
