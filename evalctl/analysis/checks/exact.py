"""The exact rung: warm returns bitwise identical to their cold twins where the engine is deterministic.

The rule, its guard and why it needs no false-alarm rate: `analysis.divergence`. Runs on a run whose
records carry logprobs (a conversation workload's, `conversation.top_logprobs`); no finding otherwise,
and none on a cell whose healthy pairs are not all exact (the divergence rung judges it).
"""

from __future__ import annotations

from evalctl.analysis.checks.base import Check, GateCheck, GateInputs
from evalctl.analysis.divergence import Settings, cell_pairs, exact_rung, worst_requests

KIND = "exact"


class Exact(GateCheck):
    kind = KIND
    order = 36
    settings = Settings

    def results(self, inputs: GateInputs) -> list[Check]:
        settings = self.settings_of(inputs.policy)
        rows = {cell: exact_rung(pairs, settings) for cell, pairs in cell_pairs(inputs.run.samples)}
        return [
            Check(
                "warm returns exactly as cold",
                self.kind,
                row.status,
                row.reason + worst_requests(row.worst),
                **cell.as_dict(),
                metric="returns not bitwise identical to their cold twins",
                value=float(row.exceeding),
                threshold=0.0,
                b=row.exceeding,
                n=row.judged,
            )
            for cell, row in rows.items()
            if row is not None
        ]


CHECK = Exact()  # listed in analysis.checks.CHECKS
