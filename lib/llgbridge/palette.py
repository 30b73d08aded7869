"""The colours every page, plot and notebook gives the bridges and the outcomes: one source.

Not in `results.SHARED_CODE` although the notebooks use it: a colour changes no result, so editing it
reruns no analysis (the report, which lists it in the Makefile's REPORT_SRC, is redrawn).
"""

from __future__ import annotations

from .candidates import NAMES as CANDIDATE_NAMES

# the candidates' colours, given in the registry's order, so the registry holds no colour and a
# new candidate needs none (a colour is no result: candidates.py is hashed, this file is not)
_SPARE = ("#8064a2", "#f79646", "#4bacc6", "#c6a04f")
if len(CANDIDATE_NAMES) > len(_SPARE):
    raise RuntimeError(
        f"palette.py: {len(CANDIDATE_NAMES)} candidates but {len(_SPARE)} spare colours; add one to _SPARE"
    )

# the bridges, in the order the report draws them (llama.cpp as shipped first)
BRIDGES: dict[str, str] = {
    "upstream": "#c0504d",
    "fixed": "#4f9a4f",
    "sentinel": "#4f81bd",
    **dict(zip(CANDIDATE_NAMES, _SPARE)),
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
