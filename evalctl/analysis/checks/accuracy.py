"""Paired accuracy: each candidate cell against its reference on the same questions, one Holm family.

The rule, its guarantees and references: `analysis.gate` (module docstring) and `analysis.drop_rule`.

Builds judged as a differential. Under an agreement floor (`floor.replaces_cache_accuracy`), a variant's cache-on
cell scored by agreement is the candidate build's warm-vs-cold disagreement, paired prompt by prompt with the
baseline build's (b: only the candidate changed its warm answer, c: only the baseline), judged at the floor's margin
(`floor_margin`): the floor's question with the baseline build's warm path as the floor, so the floor's exact
guarantee covers it (`scripts/exact_floor.py`, any joint law of the two outcomes; docs/statistics.md). The variant's
cache-off cells are left out there: each build's cold answers are the reference of its own agreement.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pandas as pd

from evalctl.analysis.checks.base import Check, GateCheck, GateInputs
from evalctl.analysis.drop_rule import with_drop_decisions
from evalctl.analysis.floor import replaces_cache_accuracy
from evalctl.analysis.gate_policy import GatePolicy
from evalctl.analysis.noise import Noise, beyond_noise
from evalctl.analysis.pairing import Comparison, paired_table, unpaired_cells
from evalctl.analysis.power import mde_beyond_tolerance
from evalctl.analysis.throughput import cell_in_flight
from evalctl.cell import CellKey

MDE_POWER = 0.8
DIFFERENTIAL_METRIC = "agreement: warm-vs-cold disagreement beyond the baseline build's"


def drop_check(row: Any, min_n: int, name: str, kind: str, status: str, reason: str, **fields: Any) -> Check:
    """A drop-rule row's finding on its cell: the drop (b - c) / n, its tolerance, tests and flips, and the interval
    that inverts the tests where the rule judged the cell (at least `min_n` pairs); `fields` the rest of the `Check`."""
    judged = row["n"] >= min_n
    return Check(
        name,
        kind,
        status,
        reason,
        **CellKey.from_row(row).as_dict(),
        value=(int(row["b"]) - int(row["c"])) / int(row["n"]),
        threshold=float(row["tolerance"]),
        p_value=float(row["p_beyond"]),
        p_adjusted=float(row["p_adjusted"]),
        lower=float(row["rule_lower"]) if judged else None,
        upper=float(row["rule_upper"]) if judged else None,
        b=int(row["b"]),
        c=int(row["c"]),
        n=int(row["n"]),
        **fields,
    )


def drop_reason(row: pd.Series, policy: GatePolicy, facts: str, value: str = "drop", subject: str = "drop") -> str:
    """Why the drop rule decided a row as it did, with the interval that inverts its tests (`drop_rule`), then `facts`
    (below `min_n` pairs: those alone). `value` names the drop (an excess, an increase), `subject` what lies beyond or
    within the tolerance."""
    n, alpha, tol, tests = int(row["n"]), policy.alpha, row["tolerance"], int(row["tests"])
    if n < policy.min_n:
        return f"only {n} pairs (min_n {policy.min_n}); {facts}"
    bounds = f"{value} {(row['b'] - row['c']) / n:.3f}, {1 - 2 * alpha:.0%} interval [{row['rule_lower']:.3f},{row['rule_upper']:.3f}]"
    if row["status"] == "regression":
        return f"{subject} beyond {tol:.3f}: {bounds}, p_adj {row['p_adjusted']:.2g} <= {alpha} (Holm over {tests} checks); {facts}"
    if row["status"] == "pass":
        return f"{subject} within {tol:.3f}: {bounds}, p {row['p_within']:.2g} <= {alpha}; {facts}"
    holm = ""  # why an interval beyond the tolerance is still no regression: the family's adjustment
    if row["p_beyond"] <= alpha < row["p_adjusted"]:
        holm = (
            f" (beyond it alone, p {row['p_beyond']:.2g}, but not after Holm over {tests} checks: p_adj {row['p_adjusted']:.2g} > {alpha})"
        )
    return f"cannot tell the {subject} from {tol:.3f}: {bounds}{holm}; {facts}"


def _accuracy_reason(row: pd.Series, policy: GatePolicy, noise: Noise | None = None) -> str:
    n, b, c = int(row["n"]), int(row["b"]), int(row["c"])
    errors = f", {row['cand_errors']} of them request errors" if row["cand_errors"] else ""
    versus = (
        f"{row['cand_acc']:.3f} [{row['cand_lo']:.3f},{row['cand_hi']:.3f}] vs {row['reference']} "
        f"{row['ref_acc']:.3f} [{row['ref_lo']:.3f},{row['ref_hi']:.3f}]; flips {b} right->wrong{errors}, {c} wrong->right"
    )
    if noise is not None:
        versus += f"; {noise.describe()}"
    if row["status"] == "inconclusive" and n >= policy.min_n:
        unexplained = min(2 * min(b, c) / n, 0.999)  # the flips a drop does not explain, both ways
        mde = mde_beyond_tolerance(n, unexplained, row["tolerance"], policy.alpha, MDE_POWER, max(int(row["tests"]), 1))
        versus = f"a drop of {mde:.3f} would be found with {MDE_POWER:.0%} power at n={n} (MDE); {versus}"
    return drop_reason(row, policy, versus)


def _differential_reason(row: pd.Series, policy: GatePolicy) -> str:
    errors = f" ({row['cand_errors']} of them request errors)" if row["cand_errors"] else ""
    shares = (
        f"warm answers differ from the build's own cold ones on {1 - row['cand_acc']:.1%} (variant {row['variant']}) vs "
        f"{1 - row['ref_acc']:.1%} ({row['reference']}), on the same prompts; {row['b']} changed by this build only{errors}, "
        f"{row['c']} by the baseline only, of {row['n']}"
    )
    return drop_reason(row, policy, shares, "excess", "excess")


def _judged_table(comparisons: list[Comparison], policy: GatePolicy) -> pd.DataFrame:
    """The paired table of every comparison, each row with the tolerance it is judged at: the floor margin for a
    differential, else the task's; a variant's cache-off cells under an agreement floor left out (module docstring)."""
    table = paired_table(comparisons, policy.metric)
    floor = replaces_cache_accuracy(policy)
    if floor:
        table = table[~((table["kind"] == "variant") & (table["cache"] == "off"))].reset_index(drop=True)
    differential = [floor and k == "variant" and c == "on" for k, c in zip(table["kind"], table["cache"])]
    tolerance = [policy.floor_margin if d else policy.max_accuracy_drop for d in differential]
    return with_drop_decisions(table.assign(differential=differential), tolerance, policy.alpha, policy.min_n)


def measured_load(comparisons: list[Comparison]) -> dict[tuple[str, CellKey], str]:
    """(comparison, candidate cell) -> the requests each side held at once, for each concurrency comparison's cells:
    a level judged against the lowest is evidence only if the server was sent that many at once."""
    notes = {}
    for comp in [c for c in comparisons if c.kind == "concurrency"]:
        reference = dict(CellKey.groups(comp.reference))
        for cell, rows in CellKey.groups(comp.candidate):
            ref = reference.get(replace(cell, concurrency=int(comp.reference["concurrency"].min())))
            held = f"held {cell_in_flight(rows).describe()}"
            notes[comp.name, cell] = held if ref is None else f"{held} vs {cell_in_flight(ref).describe()} at {comp.reference_label}"
    return notes


def accuracy_checks(comparisons: list[Comparison], policy: GatePolicy, noise: dict[str, Noise] | None = None) -> list[Check]:
    """One check per candidate cell of each comparison, one family, and an inconclusive one per cell a comparison could
    not pair. With `noise` (by profile, the A/A arm's) a regression must also exceed the engine's own noise
    (`noise.drop_margin`), whose figures every reason shows."""
    table = _judged_table(comparisons, policy)
    load = measured_load(comparisons)
    checks = []
    for _, row in table.iterrows():
        profile_noise = (noise or {}).get(str(row["profile"]))
        differential, status = bool(row["differential"]), row["status"]
        reason = _differential_reason(row, policy) if differential else _accuracy_reason(row, policy, profile_noise)
        status, reason = beyond_noise(status, reason, row["acc_drop"], row["tolerance"], policy.alpha, profile_noise)
        held = load.get((row["comparison"], CellKey.from_row(row)))
        reason = f"{reason}; {held}" if held else reason
        name = f"{row['comparison']}: warm-vs-cold disagreement" if differential else row["comparison"]
        metric = DIFFERENTIAL_METRIC if differential else f"{policy.metric} accuracy drop"
        checks.append(drop_check(row, policy.min_n, name, "accuracy", status, reason, metric=metric, comparison=row["comparison"]))
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
