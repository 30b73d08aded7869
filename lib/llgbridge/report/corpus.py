"""Real-world schemas at corpus scale: SchemaStore through every bridge, with the mask-time figure."""

from __future__ import annotations

from collections import Counter

import pandas as pd

from ..corpus import MASKBENCH_NOTE, MASKBENCH_US
from ..palette import ORDER as BRIDGE_ORDER
from ..palette import REFERENCE
from .data import Results, takes_results
from .plots import pyplot, svg
from .prose import blocks
from .table import Cell, Section, Table, guide_order, int_columns, result_rows, shows, vocab_key


@takes_results
def corpus_section(res: Results) -> Section | None:
    ok, _ = res.load("corpus")
    if not ok:
        return None
    rows = result_rows(ok)
    fails = pd.DataFrame([f for r in ok for f in r["failures"]])
    if not fails.empty:
        fails = int_columns(
            fails.sort_values(["vocab", "bridge", "schema"], kind="stable", key=vocab_key).reset_index(drop=True)
        )
    # the same schema rejected on several vocabs: one row, its vocabs and bridges merged
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
    order = guide_order(list(rows.vocab.unique()))
    n_schemas = sorted({r["schemas"] for r in ok})
    seeds = sorted({r["params"]["seed"] for r in ok})
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
    view = view.assign(
        **{
            "jsonschema rejects": [Cell(j, "bad" if j else "") for j in view["jsonschema rejects"]],
            "under (schemas)": [Cell(u, shows(u != "0 (0)")) for u in view["under (schemas)"]],
            "over (collapsed)": [Cell(o, "cost" if o != "0 (0)" else "ok") for o in view["over (collapsed)"]],
            "matcher errors": [Cell(e, shows(e)) for e in view["matcher errors"]],
            "stop disagree": [Cell(s, "bad" if s else "") for s in view["stop disagree"]],
        }
    )
    by_bridge = rows.groupby("bridge")[["under", "over", "over_collapsed", "errors", "jsonschema_invalid"]].sum()

    def total(b: str, col: str) -> int:
        return int(by_bridge[col].get(b, 0)) if col in by_bridge else 0

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
    sec = Section("corpus", "Real-world schemas at corpus scale: SchemaStore through every bridge", notebook="corpus")
    cols = ("under", "over", "over_collapsed", "errors")
    said = blocks(
        "corpus",
        maskbench=MASKBENCH_US,
        maskbench_note=MASKBENCH_NOTE,
        n_schemas=n_schemas,
        seeds=seeds,
        t={b: {c: total(b, c) for c in cols} for b in ("upstream", "fixed", "sentinel")},
        disagreements=int(rows.drop_duplicates("vocab").jsonschema_invalid.sum()),
        reasons=[f"{k} ({n})" for k, n in reasons.most_common(6)],
    )
    sec.text, sec.more = said["text"], said["more"]

    # the timing is `make bench`'s snapshot (timings vary from run to run), on the vocabs sampled here
    snap = res.corpus_timing or {"hist": {}, "timing": [], "hist_edges_us": []}
    sampled = {r["vocab"] for r in ok}
    timing = {(t["vocab"], t["bridge"]): t for t in snap["timing"] if t["vocab"] in sampled}
    hist = {k: c for k, c in snap["hist"].items() if k.split("/")[0] in sampled}

    def figure(maskbench: dict[str, int]) -> str:
        """Mask time per step: one panel per bridge, one line per vocab, MaskBench's avg/p50/p99 marked."""
        import numpy as np

        plt = pyplot()
        bridges = [b for b in BRIDGE_ORDER if any(k.endswith("/" + b) for k in hist)]
        if not bridges:
            return ""
        fig, axes = plt.subplots(1, len(bridges), figsize=(4.4 * len(bridges), 3.9), sharey=True, squeeze=False)
        edges = np.array(snap["hist_edges_us"])
        # the x range the data covers (the bins run to 1 s, most masks take microseconds)
        used = [i for c in hist.values() for i, n in enumerate(c) if n]
        hi = max(float(edges[max(used) + 1]) if used else 1e3, maskbench["p99"] * 2.0)
        styles = {"p50": "--", "avg": ":", "p99": "-."}
        drawn = guide_order(sorted(sampled))
        for ax, b in zip(axes[0], bridges):
            for v in drawn:
                counts = hist.get(f"{v}/{b}")
                t = timing.get((v, b), {})
                if counts and sum(counts):
                    # the legend's figures are the rows of corpus/mask-time.csv, from the same walks as the curve
                    ax.stairs(
                        counts,
                        edges,
                        label=(
                            f"{v}: avg {t.get('mask_us_avg')}, p50 {t.get('mask_us_p50')}, p99 {t.get('mask_us_p99')}"
                        ),
                    )
            for name, us in maskbench.items():
                ax.axvline(us, color=REFERENCE, ls=styles.get(name, ":"), lw=1, label=f"MaskBench {name} {us}")
            ax.set_xscale("log")
            ax.set_xlim(edges[0] * 0.8, hi)
            ax.set_title(b, fontsize=11)
            ax.set_xlabel("µs per mask (log)", fontsize=10)
            # below the panel, not over the curves: at 9 pt it would hide them
            ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(0, -0.22), frameon=False)
        axes[0][0].set_ylabel("masks")
        fig.suptitle("llg_matcher_compute_mask time per step along the sample's walks (make bench's run)", fontsize=11)
        fig.subplots_adjust(top=0.86, bottom=0.55, left=0.06, right=0.99, wspace=0.06)
        out = svg(fig)
        plt.close(fig)
        return out

    sec.views.append(Table(view, "Per vocab and bridge", collapsed=True))
    plot = figure(MASKBENCH_US)
    if plot:
        sec.assets["corpus/mask-time.svg"] = plot
        # the legend's figures as a table: one source for the plot and the numbers beside it
        sec.assets["corpus/mask-time.csv"] = pd.DataFrame([timing[k] for k in sorted(timing)]).to_csv(
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
    sec.raw_table("corpus", rows)
    if not fails.empty:
        sec.raw_table("corpus_failures", fails)
    if not rej.empty:
        sec.raw_table("corpus_rejected", rej)
    return sec
