"""Real-world schemas at corpus scale: SchemaStore through every bridge, with the mask-time figure."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ...palette import ORDER as BRIDGE_ORDER
from ...palette import REFERENCE
from ...report.data import PageData, takes_page_data
from ...report.plots import legend_below, pyplot, svg
from ...report.prose import blocks
from ...report.table import Cell, Section, Table, guide_order, int_columns, result_rows, shows, vocab_key
from .compute import MASKBENCH_NOTE, MASKBENCH_US


def corpus_frames(ok: list[dict[str, Any]]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(rows, failures, rejected schemas) of the corpus results, sorted; the same schema rejected
    on several vocabs is one row, its vocabs and bridges merged."""
    rows = result_rows(ok)
    fails = pd.DataFrame([f for r in ok for f in r["failures"]])
    if not fails.empty:
        fails = int_columns(
            fails.sort_values(["vocab", "bridge", "schema"], kind="stable", key=vocab_key).reset_index(drop=True)
        )
    rej = pd.DataFrame([x for r in ok for x in r.get("rejected", [])])
    if not rej.empty:
        rej = (
            rej.groupby(["schema", "name", "status", "error"], sort=True)
            .agg(
                vocabs=("vocabs", lambda s: " ".join(sorted({v for x in s for v in x.split()}))),
                bridges=("bridges", lambda s: " ".join(sorted({b for x in s for b in x.split()}))),
            )
            .reset_index()
        )
    return rows, fails, rej


def corpus_view(rows: pd.DataFrame) -> pd.DataFrame:
    """Per vocab (the guide's order) and bridge, its counts as the page shows them, coloured."""
    order = guide_order(list(rows.vocab.unique()))
    view = rows.assign(_o=rows.vocab.map({v: i for i, v in enumerate(order)})).sort_values(
        ["_o", "bridge"], kind="stable"
    )
    view = pd.DataFrame(
        {
            "vocab": view.vocab,
            "bridge": view.bridge,
            "compiled": [
                f"{c} / {s}" if not e else "not built" for c, s, e in zip(view.compiled, view.schemas, view.build_error)
            ],
            "instances": view.instances,
            "jsonschema rejects": view.jsonschema_invalid,
            "masks": view.masks,
            "under (schemas)": [f"{u} ({k})" for u, k in zip(view.under, view.under_schemas)],
            "over (collapsed)": [f"{o} ({c})" for o, c in zip(view.over, view.over_collapsed)],
            "matcher errors": view.errors,
            "stop disagree": view.stop_disagree,
        }
    ).reset_index(drop=True)
    return view.assign(
        **{
            "jsonschema rejects": [Cell(j, "bad" if j else "") for j in view["jsonschema rejects"]],
            "under (schemas)": [Cell(u, shows(u != "0 (0)")) for u in view["under (schemas)"]],
            "over (collapsed)": [Cell(o, "cost" if o != "0 (0)" else "ok") for o in view["over (collapsed)"]],
            "matcher errors": [Cell(e, shows(e)) for e in view["matcher errors"]],
            "stop disagree": [Cell(s, "bad" if s else "") for s in view["stop disagree"]],
        }
    )


def reject_reasons(rej: pd.DataFrame) -> Counter[str]:
    """Why llguidance rejected schemas, one count per reason (a schema once)."""
    reasons: Counter[str] = Counter()
    if not rej.empty:
        for e in rej[rej.status == "rejected"].drop_duplicates("schema").error:
            msg = str(e).split("failed to compile JSON schema: ")[-1]
            # a remote or missing $ref names its URL: one reason, not one per URL
            reasons[
                (
                    "$ref not resolvable"
                    if msg.startswith(("Resource '", "Pointer '", "a $ref to a document"))
                    else msg.split(":")[0].split(". ")[0]
                )[:60]
            ] += 1
    return reasons


def corpus_prose(ok: list[dict[str, Any]], rows: pd.DataFrame, rej: pd.DataFrame) -> dict[str, str]:
    """The section's text and how it was measured, from the totals per bridge."""
    by_bridge = rows.groupby("bridge")[["under", "over", "over_collapsed", "errors", "jsonschema_invalid"]].sum()

    def total(b: str, col: str) -> int:
        return int(by_bridge[col].get(b, 0)) if col in by_bridge else 0

    cols = ("under", "over", "over_collapsed", "errors")
    return blocks(
        "corpus",
        maskbench=MASKBENCH_US,
        maskbench_note=MASKBENCH_NOTE,
        n_schemas=sorted({r["schemas"] for r in ok}),
        seeds=sorted({r["params"]["seed"] for r in ok}),
        t={b: {c: total(b, c) for c in cols} for b in ("upstream", "fixed", "sentinel")},
        disagreements=int(rows.drop_duplicates("vocab").jsonschema_invalid.sum()),
        reasons=[f"{k} ({n})" for k, n in reject_reasons(rej).most_common(6)],
    )


@dataclass
class MaskTimes:
    """`make bench`'s timing of the corpus sample (timings vary from run to run), on the vocabs
    sampled here: per (vocab, bridge) its figures, and per "vocab/bridge" its histogram."""

    sampled: set[str]
    edges: list[float]
    timing: dict[tuple[str, str], dict[str, Any]]
    hist: dict[str, list[int]]

    @classmethod
    def of(cls, res: PageData, ok: list[dict[str, Any]]) -> MaskTimes:
        snap = res.corpus_timing or {"hist": {}, "timing": [], "hist_edges_us": []}
        sampled = {r["vocab"] for r in ok}
        return cls(
            sampled,
            snap["hist_edges_us"],
            {(t["vocab"], t["bridge"]): t for t in snap["timing"] if t["vocab"] in sampled},
            {k: c for k, c in snap["hist"].items() if k.split("/")[0] in sampled},
        )


def mask_figure(times: MaskTimes, maskbench: dict[str, int]) -> str:
    """Mask time per step: one panel per bridge, one line per vocab, MaskBench's avg/p50/p99 marked."""
    fig = mask_time_figure(times, maskbench)
    if fig is None:
        return ""
    out = svg(fig)
    pyplot().close(fig)
    return out


def mask_time_figure(times: MaskTimes, maskbench: dict[str, int]) -> Any:
    """`mask_figure`'s figure, or None where no bridge was timed."""
    import numpy as np

    plt = pyplot()
    hist = times.hist
    bridges = [b for b in BRIDGE_ORDER if any(k.endswith("/" + b) for k in hist)]
    if not bridges:
        return None
    fig, axes = plt.subplots(1, len(bridges), figsize=(4.4 * len(bridges), 3.9), sharey=True, squeeze=False)
    edges = np.array(times.edges)
    # the x range the data covers (the bins run to 1 s, most masks take microseconds)
    used = [i for c in hist.values() for i, n in enumerate(c) if n]
    hi = max(float(edges[max(used) + 1]) if used else 1e3, maskbench["p99"] * 2.0)
    for ax, b in zip(axes[0], bridges):
        _mask_panel(ax, b, times, (edges, hi), maskbench)
    axes[0][0].set_ylabel("masks")
    fig.suptitle("llg_matcher_compute_mask time per step along the sample's walks (make bench's run)", fontsize=11)
    fig.subplots_adjust(top=0.86, bottom=0.55, left=0.06, right=0.99, wspace=0.06)
    fig.canvas.draw()
    for ax in axes[0]:
        legend_below(ax)
    return fig


def _mask_panel(ax: Any, b: str, times: MaskTimes, x: tuple[Any, float], maskbench: dict[str, int]) -> None:
    """One bridge's panel: a line per vocab, MaskBench's figures as vertical lines; `x` is the
    bins' edges and where the axis ends."""
    edges, hi = x
    styles = {"p50": "--", "avg": ":", "p99": "-."}
    for v in guide_order(sorted(times.sampled)):
        counts = times.hist.get(f"{v}/{b}")
        t = times.timing.get((v, b), {})
        if counts and sum(counts):
            # the legend's figures are the rows of corpus/mask-time.csv, from the same walks as the curve
            ax.stairs(
                counts,
                edges,
                label=(f"{v}: avg {t.get('mask_us_avg')}, p50 {t.get('mask_us_p50')}, p99 {t.get('mask_us_p99')}"),
            )
    for name, us in maskbench.items():
        ax.axvline(us, color=REFERENCE, ls=styles.get(name, ":"), lw=1, label=f"MaskBench {name} {us}")
    ax.set_xscale("log")
    ax.set_xlim(edges[0] * 0.8, hi)
    ax.set_title(b, fontsize=11)
    ax.set_xlabel("µs per mask (log)", fontsize=10)
    # below the panel, not over the curves: at 9 pt it would hide them (`legend_below` puts it under the label)
    ax.legend(fontsize=9, loc="upper left", frameon=False)


def add_mask_figure(sec: Section, times: MaskTimes) -> None:
    """The figure, and the legend's figures as a table beside it: one source for both."""
    plot = mask_figure(times, MASKBENCH_US)
    if not plot:
        return
    sec.assets["corpus/mask-time.svg"] = plot
    sec.assets["corpus/mask-time.csv"] = pd.DataFrame([times.timing[k] for k in sorted(times.timing)]).to_csv(
        index=False, lineterminator="\n"
    )
    sec.figure = (
        "<img src='corpus/mask-time.svg' alt='llg_matcher_compute_mask time per step along the walks, per bridge "
        "and vocab, with MaskBench marked' style='max-width:100%'>"
    )
    sec.figure_caption = (
        "Read: how long each `llg_matcher_compute_mask` call took along the sample's walks, one panel per bridge "
        "and one line per vocab (log axis), beside MaskBench's published llguidance figures (dashed); the legend "
        "gives each line's average, p50 and p99 in µs. One `make bench` run."
    )


@takes_page_data
def corpus_section(res: PageData) -> Section | None:
    ok, _ = res.load("corpus")
    if not ok:
        return None
    rows, fails, rej = corpus_frames(ok)
    sec = Section("corpus", "Real-world schemas at corpus scale: SchemaStore through every bridge", notebook="corpus")
    said = corpus_prose(ok, rows, rej)
    sec.text, sec.more = said["text"], said["more"]
    sec.views.append(Table(corpus_view(rows), "Per vocab and bridge", collapsed=True))
    add_mask_figure(sec, MaskTimes.of(res, ok))
    sec.raw_table("corpus", rows)
    if not fails.empty:
        sec.raw_table("corpus_failures", fails)
    if not rej.empty:
        sec.raw_table("corpus_rejected", rej)
    return sec
