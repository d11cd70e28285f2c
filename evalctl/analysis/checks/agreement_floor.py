"""Warm-vs-cold disagreement against the A/A arm's cold-vs-cold floor (policy `agreement_floor: aa`), a Holm family per build.

The rule, its guarantee and what it assumes: `analysis.floor`. Off unless the policy asks for it. A build's
verdict is the one it gets when swept alone; the price (alpha more of the run's false-regression bound per
build judged) is stated in `analysis.gate`.
"""

from __future__ import annotations

import pandas as pd

from evalctl.agreement import AGREEMENT
from evalctl.analysis.checks.accuracy import drop_check, drop_reason
from evalctl.analysis.checks.base import Check, GateCheck, GateInputs
from evalctl.analysis.drop_rule import with_drop_decisions
from evalctl.analysis.floor import CACHE_COMPARISON, floor_comparison
from evalctl.analysis.gate_policy import GatePolicy
from evalctl.analysis.pairing import paired_table, unpaired_cells
from evalctl.cell import CellKey
from evalctl.schema import CacheMode

KIND = "agreement-floor"
NAME = f"{CACHE_COMPARISON} against the A/A floor"
NO_ARM = (
    "no A/A arm in this run: the floor is the cold-vs-cold disagreement of each server's reference cell run twice; "
    "set `noise: true` in the sweep config"
)
# The arm repeats every reference cell of every server (`plan.noise_cells`): a cell it lacks is a gap in this run.
ARM_SCOPE = "the A/A arm repeats every server's reference cells: its arm failed or stopped, or the run predates per-variant arms"


def _reason(row: pd.Series, policy: GatePolicy) -> str:
    shares = (
        f"warm answers differ from the cold ones on {1 - row['cand_acc']:.1%}, the cold replica on {1 - row['ref_acc']:.1%} (the floor); "
        f"{row['b']} differ warm only, {row['c']} cold only, of {row['n']}"
    )
    return drop_reason(row, policy, shares, "excess", "excess over the floor")


def floor_checks(samples: pd.DataFrame, replica: pd.DataFrame, policy: GatePolicy) -> list[Check]:
    """One finding per cache-on cell: its excess disagreement over the floor, or why it cannot be judged."""
    warm_cells = samples[samples["cache"] == CacheMode.on.value]
    if warm_cells.empty:
        return [Check(NAME, KIND, "inconclusive", "no cache-on cell to judge against the floor")]
    if replica.empty:
        return [
            Check(NAME, KIND, "inconclusive", NO_ARM, **cell.as_dict(), comparison=CACHE_COMPARISON)
            for cell, _ in CellKey.groups(warm_cells)
        ]
    comparison = floor_comparison(samples, replica)
    checks = []
    for variant, group in paired_table([comparison], AGREEMENT).groupby("variant", sort=False):  # a Holm family per build
        table = with_drop_decisions(group, policy.floor_margin, policy.alpha, policy.min_n)
        checks += [
            drop_check(
                row,
                policy.min_n,
                NAME,
                KIND,
                row["status"],
                _reason(row, policy),
                metric="agreement: warm minus cold-vs-cold disagreement",
                comparison=CACHE_COMPARISON,
                family=f"{KIND} {variant}",
            )
            for _, row in table.iterrows()
        ]
    for _, row in unpaired_cells(comparison, AGREEMENT).iterrows():
        reason = f"nothing to pair with the floor: {row['reason']} ({ARM_SCOPE})"
        checks.append(Check(NAME, KIND, "inconclusive", reason, **CellKey.from_row(row).as_dict(), comparison=CACHE_COMPARISON))
    return checks


class AgreementFloor(GateCheck):
    kind = KIND
    order = 35
    family = KIND

    def results(self, inputs: GateInputs) -> list[Check]:
        if inputs.policy.agreement_floor is None:
            return []
        return floor_checks(inputs.run.samples, inputs.run.noise, inputs.policy)


CHECK = AgreementFloor()  # listed in analysis.checks.CHECKS
