"""The report's figures: inline SVG with fixed ids and no date, so a page is byte-stable; the bars
every section draws per bridge."""

from __future__ import annotations

import io
import re
import textwrap
from typing import Any

import pandas as pd

from ..palette import BRIDGES as PALETTE
from ..palette import ORDER as BRIDGE_ORDER
from .table import guide_order


def svg(fig: Any) -> str:
    """A figure as inline SVG with fixed ids and no date, so the page is byte-stable."""
    import matplotlib

    matplotlib.rcParams["svg.hashsalt"] = "llgbridge"
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight")
    text = buf.getvalue()
    return text[text.index("<svg") :]


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def total(x: pd.DataFrame, c: str) -> int:
    """Column `c` of rows `x` summed, a missing or non-numeric value as 0."""
    return int(pd.to_numeric(x[c], errors="coerce").fillna(0).sum())


def present_bridges(df: pd.DataFrame) -> list[str]:
    """The bridges in `df`, in the palette's order (sorted where none is the palette's)."""
    return [b for b in BRIDGE_ORDER if b in set(df["bridge"])] or sorted(df["bridge"].unique())


def drawn(df: pd.DataFrame, col: str, title: str) -> tuple[list[str], list[str], str]:
    """(the bridges drawn, the vocabs drawn, the title): a bridge that is 0 everywhere is said in
    the title rather than drawn as 19 empty bars, and so is a vocab at 0 on every bridge."""
    vocabs = guide_order(list(df.vocab.unique()))
    present = present_bridges(df)
    groups = [b for b in present if total(df[df["bridge"] == b], col)] or present[-1:]
    zero = [b for b in present if b not in groups]
    if zero:
        title += f"\n({', '.join(zero)}: 0 on every vocab)"
    quiet = [v for v in vocabs if not total(df[df.vocab == v], col)]
    if quiet and len(quiet) < len(vocabs):
        vocabs = [v for v in vocabs if v not in quiet]
        title += "\n" + textwrap.fill(f"(0 on every bridge, not drawn: {', '.join(quiet)})", 90)
    return groups, vocabs, title


def bar_values(df: pd.DataFrame, col: str, b: str, vocabs: list[str], steps: str) -> tuple[list[int], list[str], bool]:
    """Bridge `b`'s bars, one per vocab: (values, labels, whether a label says its steps fell short).
    With `steps`, a bar whose bridge covered fewer steps than another on the same vocab says how many."""
    present = present_bridges(df)
    vals, labels, short = [], [], False
    for v in vocabs:
        x = df[(df.vocab == v) & (df["bridge"] == b)]
        n = total(x, col)
        label = f" {n}"
        if steps and not x.empty:
            mine, most = total(x, steps), max(total(df[(df.vocab == v) & (df["bridge"] == o)], steps) for o in present)
            if mine < most:
                label += f" ({mine} of {most} steps)"
                short = True
        vals.append(n)
        labels.append(label)
    return vals, labels, short


def legend_below(ax: Any, gap_pt: float = 4) -> None:
    """`ax`'s legend put just under its x label, left-aligned with the panel: a legend anchored at a
    fixed fraction of the panel's height lies over the label wherever the ticks' height differs
    from the guess. Needs a drawn figure (the label's extent is known only then)."""
    fig = ax.figure
    label = ax.xaxis.label.get_window_extent(fig.canvas.get_renderer())
    left = ax.get_window_extent().x0
    anchor = ax.transAxes.inverted().transform((left, label.y0 - gap_pt * fig.dpi / 72))
    ax.get_legend().set_bbox_to_anchor((0, anchor[1]), transform=ax.transAxes)


def log_axis(df: pd.DataFrame, col: str) -> bool:
    """Whether `bar_by_bridge` draws `col` on a log axis: only where a bar is above 0. A log scale
    needs a positive bar: with every bar at 0 (a what-if where the bug does not show) matplotlib
    warns and draws nothing, so the axis stays linear."""
    return bool(pd.to_numeric(df[col], errors="coerce").fillna(0).max() > 0) if col in df else False


def on_axis(text: str, log: bool) -> str:
    """A label or caption written for a log axis, as it reads on the axis drawn: on a linear one
    its "log axis" is taken out, so it never says log over a linear axis."""
    return text if log else re.sub(r" ?\(log axis\)|log axis[;,] ", "", text)


def x_axis(ax: Any, peak: float, xlabel: str) -> None:
    """The bars' axis: log where a bar is above 0 (`log_axis`), else linear, its label said so."""
    if peak > 0:
        ax.set_xscale("log")
        ax.set_xlim(0.8, max(1, int(peak)) * 60)
    else:
        ax.set_xlim(0, 1)
    ax.set_xlabel(on_axis(xlabel, peak > 0), fontsize=9)


def bar_by_bridge(df: pd.DataFrame, col: str, title: str, xlabel: str, steps: str = "") -> str:
    """Grouped horizontal bars on a log axis (a linear one where every bar is 0, `log_axis`: a
    caption that says "log axis" goes through `on_axis`), one group per vocab, every value printed
    at its bar's end (a zero has no bar on a log axis: it is printed at the axis). The legend runs
    in the bars' order, under the axis' label. With `steps`, a bar whose bridge covered fewer steps
    than another on the same vocab (its matcher died) says how many it covered."""
    fig = bar_figure(df, col, title, xlabel, steps)
    if fig is None:
        return ""
    out = svg(fig)
    pyplot().close(fig)
    return out


def bar_figure(df: pd.DataFrame, col: str, title: str, xlabel: str, steps: str = "") -> Any:
    """`bar_by_bridge`'s figure, or None where there is nothing to draw."""
    if col not in df or df[col].isna().all():
        return None  # every row is an error row (a bridge that could not be built or masked): nothing to draw
    df = df[df[col].notna()]
    plt = pyplot()
    groups, vocabs, title = drawn(df, col, title)
    fig, ax = plt.subplots(figsize=(7, 0.13 * len(vocabs) * len(groups) + 1.3))
    h = 0.8 / len(groups)
    short = False
    log = log_axis(df, col)
    for j, b in enumerate(groups):
        vals, labels, fell_short = bar_values(df, col, b, vocabs, steps)
        short = short or fell_short
        # vocab i's group sits at -i, its first bridge on top, so the legend reads as the bars do
        ys = [-i - j * h for i in range(len(vocabs))]
        ax.barh(ys, vals, height=h, label=b, color=PALETTE.get(b))
        for y, x, label in zip(ys, vals, labels):
            ax.text(max(x, 1) if log else x, y, label, va="center", fontsize=7)
    ax.set_yticks([-i - h * (len(groups) - 1) / 2 for i in range(len(vocabs))], vocabs, fontsize=8)
    x_axis(ax, pd.to_numeric(df[col], errors="coerce").fillna(0).max(), xlabel)
    ax.set_title(
        title + ("\n(steps covered in brackets where a bridge's matcher died before the walk's end)" if short else ""),
        fontsize=10,
    )
    # under the axis, not in a corner of it: the longest bar's printed count reaches the corner
    ax.legend(loc="upper left", fontsize=8, ncol=len(groups), frameon=False)
    plt.tight_layout()
    fig.canvas.draw()
    legend_below(ax)
    return fig
