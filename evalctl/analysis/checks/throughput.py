"""Per-request throughput: a slowdown beyond `max_throughput_drop`, by rank tests, Holm over its own family."""

from __future__ import annotations

from evalctl.analysis.checks.base import Check, GateCheck, GateInputs
from evalctl.analysis.drop_rule import decide
from evalctl.analysis.gate_policy import GatePolicy
from evalctl.analysis.pairing import Comparison
from evalctl.analysis.throughput_checks import MEASURES, slowdown_tests
from evalctl.cell import CellKey


def throughput_checks(comparisons: list[Comparison], policy: GatePolicy) -> list[Check]:
    """Per-request rank tests of a slowdown beyond `max_throughput_drop` (`throughput_checks`),
    Holm over the throughput checks, pass only when the slowdown is shown to be within it."""
    if policy.max_throughput_drop is None:
        return []
    tol = policy.max_throughput_drop
    table = slowdown_tests(comparisons, tol)
    tested = (table[["ref_requests", "cand_requests"]].min(axis=1) >= policy.min_n).to_numpy()
    status, p_adjusted = decide(table["p_slower"], table["p_within"], tested, policy.alpha)
    checks = []
    for (_, row), state, p_adj, ok in zip(table.iterrows(), status, p_adjusted, tested):
        n = int(min(row["ref_requests"], row["cand_requests"]))
        detail = (
            f"median {row['measure']} {row['cand_median']:.3g} vs {row['reference']} {row['ref_median']:.3g} "
            f"(ratio {row['ratio']:.2f}, slowdown {row['slowdown']:.1%}; tolerated {tol:.0%})"
        )
        reason = {
            "regression": f"slower beyond the tolerance: rank test p_adj {p_adj:.2g} <= {policy.alpha}; {detail}",
            "pass": f"within the tolerance: rank test p {row['p_within']:.2g} <= {policy.alpha}; {detail}",
            "inconclusive": f"cannot tell the slowdown from {tol:.0%} (p_adj {p_adj:.2g}, p within {row['p_within']:.2g}); {detail}"
            if ok
            else f"only {n} requests timed (min_n {policy.min_n}); {detail}",
        }[state]
        checks.append(
            Check(
                f"{row['comparison']}: {row['measure']}",
                "throughput",
                state,
                reason,
                **CellKey.from_row(row).as_dict(),
                metric=f"{row['measure']} median ratio",
                value=float(row["ratio"]),
                threshold=1 - tol if MEASURES[row["measure"]] else 1 / (1 - tol),
                p_value=float(row["p_slower"]),
                p_adjusted=float(p_adj),
                n=n,
                comparison=row["comparison"],
            )
        )
    return checks


class Throughput(GateCheck):
    kind = "throughput"
    order = 40
    family = "throughput"

    def results(self, inputs: GateInputs) -> list[Check]:
        return throughput_checks(inputs.comparisons, inputs.policy)


CHECK = Throughput()  # listed in analysis.checks.CHECKS
