"""Paired accuracy: each candidate cell against its reference on the same questions, one Holm family.

The rule, its guarantees and references: `analysis.gate` (module docstring) and `analysis.drop_rule`.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from evalctl.analysis.checks.base import Check, GateCheck, GateInputs
from evalctl.analysis.drop_rule import with_drop_decisions
from evalctl.analysis.floor import replaces_cache_accuracy
from evalctl.analysis.gate_policy import GatePolicy
from evalctl.analysis.noise import Noise, drop_margin
from evalctl.analysis.pairing import Comparison, paired_table, unpaired_cells
from evalctl.analysis.power import mde_beyond_tolerance
from evalctl.cell import CellKey

MDE_POWER = 0.8


def paired_drop(row: Any, policy: GatePolicy) -> dict[str, Any]:
    """A paired comparison's figures as a check reports them: the drop, its test and interval, the flips.
    The interval only where the rule judged the cell (at least `min_n` pairs)."""
    judged = row["n"] >= policy.min_n
    return {
        "value": float(row["acc_drop"]),
        "threshold": policy.max_accuracy_drop,
        "p_value": float(row["p_beyond"]),
        "p_adjusted": float(row["p_adjusted"]),
        "lower": float(row["rule_lower"]) if judged else None,
        "upper": float(row["rule_upper"]) if judged else None,
        "b": int(row["b"]),
        "c": int(row["c"]),
        "n": int(row["n"]),
    }


def _accuracy_reason(row: pd.Series, policy: GatePolicy, tests: int, noise: Noise | None = None) -> str:
    tol, alpha, n, b, c = policy.max_accuracy_drop, policy.alpha, int(row["n"]), int(row["b"]), int(row["c"])
    errors = f", {row['cand_errors']} of them request errors" if row["cand_errors"] else ""
    versus = (
        f"{row['cand_acc']:.3f} [{row['cand_lo']:.3f},{row['cand_hi']:.3f}] vs {row['reference']} "
        f"{row['ref_acc']:.3f} [{row['ref_lo']:.3f},{row['ref_hi']:.3f}]; flips {b} right->wrong{errors}, {c} wrong->right"
    )
    if noise is not None:
        versus += f"; {noise.describe()}"
    if n < policy.min_n:
        return f"only {n} pairs (min_n {policy.min_n}); {versus}"
    bounds = f"drop {row['acc_drop']:.3f}, {1 - 2 * alpha:.0%} interval [{row['rule_lower']:.3f},{row['rule_upper']:.3f}]"
    if row["status"] == "regression":
        return f"drop beyond {tol:.3f}: {bounds}, p_adj {row['p_adjusted']:.2g} <= {alpha} (Holm over {tests} checks); {versus}"
    if row["status"] == "pass":
        return f"drop within {tol:.3f}: {bounds}, p {row['p_within']:.2g} <= {alpha}; {versus}"
    unexplained = min(2 * min(b, c) / n, 0.999)  # the flips a drop does not explain, both ways
    mde = mde_beyond_tolerance(n, unexplained, tol, alpha, MDE_POWER, max(tests, 1))
    return (
        f"cannot tell the drop from {tol:.3f}: {bounds}; a drop of {mde:.3f} would be found with "
        f"{MDE_POWER:.0%} power at n={n} (MDE); {versus}"
    )


def accuracy_checks(comparisons: list[Comparison], policy: GatePolicy, noise: dict[str, Noise] | None = None) -> list[Check]:
    """One check per candidate cell of each comparison, all in one family (see the module
    docstring), plus an inconclusive check for each cell a comparison could not pair.

    With `noise` (by profile, from the run's A/A arm) a regression must also exceed the
    engine's own noise (`noise.drop_margin`); the figures are shown in every reason."""
    table = with_drop_decisions(paired_table(comparisons, policy.metric), policy.max_accuracy_drop, policy.alpha, policy.min_n)
    tests = int((table["n"] >= policy.min_n).sum())
    checks = []
    for _, row in table.iterrows():
        profile_noise = (noise or {}).get(str(row["profile"]))
        status, reason = row["status"], _accuracy_reason(row, policy, tests, profile_noise)
        margin = drop_margin(policy.max_accuracy_drop, policy.alpha, profile_noise)
        if status == "regression" and row["acc_drop"] <= margin:
            status = "inconclusive"
            noise_bound = margin - policy.max_accuracy_drop
            reason = f"not above tolerance plus the engine's own noise drop (upper bound {noise_bound:.3f}) = {margin:.3f}: {reason}"
        checks.append(
            Check(
                row["comparison"],
                "accuracy",
                status,
                reason,
                **CellKey.from_row(row).as_dict(),
                metric=f"{policy.metric} accuracy drop",
                **paired_drop(row, policy),
                comparison=row["comparison"],
            )
        )
    for comp in comparisons:
        for _, row in unpaired_cells(comp, policy.metric).iterrows():
            cell = CellKey.from_row(row).as_dict()
            checks.append(Check(comp.name, "accuracy", "inconclusive", f"nothing to pair: {row['reason']}", **cell))
    return checks


def nothing_to_compare() -> list[Check]:
    """The one finding of a gate with no pair to judge: never a silent pass."""
    why = "nothing to compare: the run has no cache on/off, variant, profile or pass pairs, and no baseline run shares its cells"
    return [Check("paired comparison", "accuracy", "inconclusive", why)]


class Accuracy(GateCheck):
    kind = "accuracy"
    order = 30
    family = "accuracy"

    def results(self, inputs: GateInputs) -> list[Check]:
        if inputs.sequential:
            return []  # the sequential decisions judge accuracy (`checks.sequential`)
        floor = replaces_cache_accuracy(inputs.policy)
        comparisons = [c for c in inputs.comparisons if not (floor and c.kind == "cache")]
        if floor and not comparisons and inputs.comparisons:
            return []  # the floor check judges the run's only comparison
        return accuracy_checks(comparisons, inputs.policy, inputs.noise) or nothing_to_compare()


CHECK = Accuracy()  # listed in analysis.checks.CHECKS
