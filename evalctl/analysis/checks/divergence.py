"""The divergence rung (`analysis.divergence`: Rosenbaum's exceedance count against the run's healthy spread, a Holm
family per build, false regression <= alpha under exchangeability, measured by `scripts/divergence_false_alarms.py`),
on a run whose records carry logprobs (a conversation workload's); no finding otherwise.

The ladder: where the rung passed a cache-on cell and that cell's answer rung (cache on vs off accuracy) could not
decide, the finding becomes a warning when every request of the cell whose tokens moved parted within the healthy
spread (`analysis.divergence.near_ties`): near ties a healthy warm path makes. A regression of the answer rung stands,
and so does any move beyond the spread.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import pandas as pd

from evalctl.analysis.checks.base import Check, GateCheck, GateInputs
from evalctl.analysis.divergence import Settings, decided, near_ties, rungs, worst_requests
from evalctl.analysis.floor import CACHE_COMPARISON
from evalctl.cell import CellKey

KIND = "divergence"
# An undecided hunt's returns beyond the spread are leads (`analysis.leads`): copies of their conversations decide.
NAME = "warm returns' logprobs against the healthy spread"
FOLLOW = "; follow them up: evalctl sweep --follow RUN (copies of their conversations, judged with this run)"


class Divergence(GateCheck):
    kind = KIND
    order = 37
    family = KIND
    settings = Settings

    def results(self, inputs: GateInputs) -> list[Check]:
        hunt = inputs.run.config.get("workload") == "hunt" and not inputs.run.config.get("hunt", {}).get("follow")
        undecided = FOLLOW if hunt and inputs.run.follow_up is None else ""  # a follow-up's own leads name no hunt's shape
        return findings(inputs.run.samples, self.settings_of(inputs.policy), inputs.policy.alpha, NAME, undecided)

    def revise(self, inputs: GateInputs, earlier: list[Check]) -> list[Check]:
        """An undecided answer comparison of a cell this rung passed: a warning when every move was a near tie."""
        found = rungs(inputs.run.samples, self.settings_of(inputs.policy)).items()
        return near_tie_warnings(earlier, {cell: near_ties(pairs, row.threshold) for cell, (row, pairs) in found if row.status == "pass"})


def near_tie_warnings(checks: list[Check], ties: Mapping[CellKey | None, str | None]) -> list[Check]:
    """`checks` with each undecided cache on vs off answer check of a cell in `ties` a warning, where `near_ties` said
    why (the ladder: module docstring)."""
    undecided = ("accuracy", CACHE_COMPARISON, "inconclusive")
    tied = [(c, ties.get(c.cell) if (c.kind, c.comparison, c.status) == undecided else None) for c in checks]
    return [replace(c, status="warning", reason=f"{c.reason}; {why}") if why else c for c, why in tied]


def findings(samples: pd.DataFrame, settings: Settings, alpha: float, name: str, undecided: str = "", kind: str = KIND) -> list[Check]:
    """The rung's finding per cache-on cell of `samples`, a Holm family per build; `undecided` ends the reason of an
    inconclusive finding with returns beyond the spread."""
    rows = {cell: row for cell, (row, _) in rungs(samples, settings).items()}
    return [
        Check(
            name,
            kind,
            status,
            row.reason + worst_requests(row.worst) + (undecided if status == "inconclusive" and row.exceeding else ""),
            **cell.as_dict(),
            metric="returns beyond the healthy pairs' largest divergence + margin (nats)",
            value=float(row.worst["divergence"].max()) if len(row.worst) else None,
            threshold=row.threshold,
            p_value=row.p_value,
            p_adjusted=p_adjusted,
            b=row.exceeding,
            n=row.judged,
            family=f"{kind} {cell.variant}",
        )
        for (cell, row), (status, p_adjusted) in zip(rows.items(), decided(rows, alpha).values())
    ]


CHECK = Divergence()  # listed in analysis.checks.CHECKS
