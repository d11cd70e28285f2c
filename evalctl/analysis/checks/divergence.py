"""The divergence rung: warm returns' logprobs against the healthy spread of the same run, a Holm family per build.

The rule (Rosenbaum's exceedance count), its guarantee (false regression <= alpha under
exchangeability, measured by `scripts/divergence_false_alarms.py`) and its guard: `analysis.divergence`.
Runs on a run whose records carry logprobs; no finding otherwise.
"""

from __future__ import annotations

from evalctl.analysis.checks.base import Check, GateCheck, GateInputs
from evalctl.analysis.divergence import Settings, cell_pairs, decide, divergence_rung, worst_requests

KIND = "divergence"


class Divergence(GateCheck):
    kind = KIND
    order = 37
    family = KIND
    settings = Settings

    def results(self, inputs: GateInputs) -> list[Check]:
        settings = self.settings_of(inputs.policy)
        rows = {cell: divergence_rung(pairs, settings) for cell, pairs in cell_pairs(inputs.run.samples)}
        rows = {cell: row for cell, row in rows.items() if row is not None}
        checks = []
        for variant in sorted({cell.variant for cell in rows}):
            mine = {cell: row for cell, row in rows.items() if cell.variant == variant}
            for cell, (status, p_adjusted) in decide(mine, inputs.policy.alpha).items():
                row = mine[cell]
                worst = worst_requests(row.worst)
                checks.append(
                    Check(
                        "warm returns' logprobs against the healthy spread",
                        KIND,
                        status,
                        row.reason + (f"; worst: {worst}" if worst else ""),
                        **cell.as_dict(),
                        metric="returns beyond the healthy pairs' largest divergence + margin (nats)",
                        value=float(row.worst["divergence"].max()) if len(row.worst) else None,
                        threshold=row.threshold,
                        p_value=row.p_value,
                        p_adjusted=p_adjusted,
                        b=row.exceeding,
                        n=row.judged,
                        family=f"{KIND} {variant}",
                    )
                )
        return checks


CHECK = Divergence()  # listed in analysis.checks.CHECKS
