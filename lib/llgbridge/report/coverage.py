"""How much of the full input set a render's results cover: what a partial report says on its
first screen and in its comment, and why it does not go over the committed full report.

A report is partial where some analysis of the registry has no result at all (neither usable nor
failed) on an input of its set: a narrowed `make report INPUTS=...` or `ANALYSES=...` on results
that never held the rest, or results deleted by hand. An input that ran and failed is not missing:
the failure banner names it. Results of a what-if (`PageData.subject`) are never partial: a
what-if has one input by design.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..analyses import BY_NAME
from ..inputsets import input_sets
from .data import PageData

# where a partial render goes when its folder holds a full report (reports/partial/: git-ignored)
PARTIAL = "partial"


@dataclass(frozen=True)
class Coverage:
    n_full: int  # inputs of the full set (`every`)
    left_out: list[str]  # inputs of the full set no analysis has a result on, in the set's order
    # analysis -> the inputs of its own set it has no result on (left_out ones not repeated)
    missing: dict[str, list[str]] = field(default_factory=dict)

    @property
    def partial(self) -> bool:
        return bool(self.left_out or self.missing)

    def what(self) -> str:
        """What the results lack, as one clause ("" for a full report)."""
        parts = []
        if self.left_out:
            n = self.n_full - len(self.left_out)
            parts.append(f"it measured {n} of the {self.n_full} inputs (not {_names(self.left_out)})")
        if self.missing:
            parts.append(
                "it has no result of " + "; ".join(f"{a} on {_names(v)}" for a, v in sorted(self.missing.items()))
            )
        return ", and ".join(parts)

    def said(self) -> str:
        """The first screen's and the comment's sentence, "" for a full report."""
        if not self.partial:
            return ""
        return (
            f"This report is partial: {self.what()}. Nothing in it rules on what it did not measure; "
            "make report with no INPUTS or ANALYSES makes the full one."
        )


def _names(names: list[str]) -> str:
    return ", ".join(names) if len(names) <= 6 else f"{', '.join(names[:5])} and {len(names) - 5} more"


def coverage(res: PageData) -> Coverage:
    """What the results under `res` lack of the main report's full input set."""
    sets = input_sets()
    full = sets["every"]
    if res.subject:
        return Coverage(len(full), [])
    ran: dict[str, set[str]] = {}
    for name in BY_NAME:
        ok, failed = res.load(name)
        ran[name] = {str(r.get("vocab")) for r in ok} | {str(f.get("vocab")) for f in failed}
    anywhere = set().union(*ran.values()) if ran else set()
    left_out = [v for v in full if v not in anywhere]
    missing = {}
    for name, a in BY_NAME.items():
        lacking = [v for v in sets[a.runs_on] if v not in ran[name] and v not in left_out]
        if lacking:
            missing[name] = lacking
    return Coverage(len(full), left_out, missing)
