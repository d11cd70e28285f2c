"""The sequential run's accuracy verdicts: each cell's decision against the baseline run (`execution.stopping`)."""

from __future__ import annotations

from evalctl.analysis.checks import Check, GateCheck, GateInputs, cell_of, register_check
from evalctl.analysis.checks.accuracy import nothing_to_compare
from evalctl.analysis.pairing import RUN_VS_BASELINE
from evalctl.records import CELL_KEYS
from evalctl.runs import Run


def sequential_checks(run: Run) -> list[Check]:
    """A sequential run's accuracy verdicts: per cell, its decision against the baseline run,
    when it was made and the requests it saved (`execution.stopping`).

    These replace the fixed-n accuracy checks: the fixed-n rule is not valid on a sample whose
    size the data chose, and a cell that ran to its last look was judged there by the same
    sequential rule, whose error rates hold over all looks together (`analysis.sequential`).
    A cell with rows but no decision (it failed before its last look) is inconclusive.
    """
    decided = {d.cell for d in run.manifest.decisions}
    undecided = [
        Check(
            f"{RUN_VS_BASELINE} (sequential)",
            "sequential",
            "inconclusive",
            "no sequential decision: the cell did not reach a look",
            **cell_of(row),
        )
        for _, row in run.samples[CELL_KEYS].drop_duplicates().iterrows()
        if tuple(row) not in decided
    ]
    return undecided + [
        Check(
            f"{RUN_VS_BASELINE} (sequential)",
            "sequential",
            decision.verdict,
            f"{decision.verdict} at look {decision.look} after {decision.answered} of {decision.planned} questions"
            f"{', shown by the e-process' if decision.by_e_process else ''}; {decision.saved} requests saved",
            profile=decision.profile,
            variant=decision.variant,
            cache=decision.cache,
            shots=decision.shots,
            pass_index=decision.pass_index,
            metric="requests saved",
            value=float(decision.saved),
            n=decision.answered,
        )
        for decision in run.manifest.decisions
    ]


class Sequential(GateCheck):
    kind = "sequential"
    order = 30
    family = "accuracy"  # decided by the sequential rule, whose error rates hold over all looks and cells

    def results(self, inputs: GateInputs) -> list[Check]:
        if not inputs.sequential:
            return []
        return sequential_checks(inputs.run) or nothing_to_compare()


register_check(Sequential())
