"""The colours every page, plot and notebook gives the bridges and the outcomes: one source.

Not in `results.CORE` although the notebooks use it: a colour changes no result, so editing it
reruns no analysis (the report, which lists it in the Makefile's REPORT_SRC, is redrawn).
"""

from __future__ import annotations

# the bridges, in the order the report draws them (llama.cpp as shipped first)
BRIDGES: dict[str, str] = {
    "upstream": "#c0504d",
    "fixed": "#4f9a4f",
    "sentinel": "#4f81bd",
    "nospecial": "#8064a2",
    "failclosed": "#f79646",
    "truth": "#7f7f7f",
}
ORDER: tuple[str, ...] = tuple(BRIDGES)

# outcomes: a bug showing is upstream's colour, a repair the fix's
BAD = BRIDGES["upstream"]
GOOD = BRIDGES["fixed"]
SECOND = BRIDGES["sentinel"]  # a second series beside BAD (of which, over-constraint)
UNCONSTRAINED = "#9bbb59"  # generation with no grammar: the baseline a constrained run is set against
REFERENCE = "grey"  # a published figure marked on an axis (MaskBench)

__all__ = ["BRIDGES", "ORDER", "BAD", "GOOD", "SECOND", "UNCONSTRAINED", "REFERENCE"]
