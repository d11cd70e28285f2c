"""The exact rung: warm returns bitwise identical to their cold twins, where the engine is deterministic.

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
        checks = []
        for cell, pairs in cell_pairs(inputs.run.samples):
            row = exact_rung(pairs, settings)
            if row is None:
                continue
            checks.append(
                Check(
                    "warm returns exactly as cold",
                    KIND,
                    row.status,
                    row.reason + worst_requests(row.worst),
                    **cell.as_dict(),
                    metric="returns not bitwise identical to their cold twins",
                    value=float(row.exceeding),
                    threshold=0.0,
                    b=row.exceeding,
                    n=row.judged,
                )
            )
        return checks


CHECK = Exact()  # listed in analysis.checks.CHECKS
