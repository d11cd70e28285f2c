"""Caps per cell: the share of requests that failed, and of answers with nothing the metric could extract.

A cap is a fixed share, not a test, so a handful of answers cannot prove it broken: below `min_n` a cell
regresses only when its count already exceeds what `min_n` answers would tolerate (more than `cap x
min_n`), and is inconclusive otherwise (one unlucky answer of three is no regression; four of four failed
requests at a 10% cap is). In an unfinished run a request whose last attempt hit a retryable error is
pending, not failed: `--resume` sends it again, and the completeness check reports it.
"""

from __future__ import annotations

import pandas as pd

from evalctl.analysis.checks.base import Check, GateCheck, GateInputs, Status
from evalctl.analysis.gate_policy import GatePolicy
from evalctl.cell import CellKey
from evalctl.records import is_final


def cap_status(count: int, total: int, limit: float, min_n: int) -> Status:
    """Pass at or under the cap; over it, a regression only once `count` exceeds `limit x max(total, min_n)`."""
    if not total:
        return "inconclusive"
    if count <= limit * total:
        return "pass"
    return "regression" if count > limit * max(total, min_n) else "inconclusive"


def rate_checks(samples: pd.DataFrame, policy: GatePolicy, finished: bool = True) -> list[Check]:
    """Request errors and unextractable answers, per cell, against the policy's maxima."""
    checks = []
    for cell, group in CellKey.groups(samples):
        settled = group if finished else group[is_final(group)]
        pending = len(group) - len(settled)
        errors = int(settled["error"].notna().sum())
        scored = settled[settled["error"].isna()]
        invalid = int(scored[f"{policy.metric}_answer"].isna().sum())
        for kind, count, total, limit, what in (
            ("error_rate", errors, len(settled), policy.max_error_rate, "requests failed"),
            ("invalid_rate", invalid, len(scored), policy.max_invalid_rate, f"answers had no {policy.metric} answer"),
        ):
            rate = count / total if total else float("nan")
            status = cap_status(count, total, limit, policy.min_n)
            reason = f"{count} of {total} {what} ({rate:.1%}; max {limit:.1%})" if total else "no settled answers"
            if status == "inconclusive" and total:
                reason += f"; only {total} (min_n {policy.min_n})"
            if pending and kind == "error_rate":
                reason += f"; {pending} pending (run not finished)"
            found = Check(kind.replace("_", " "), kind, status, reason, **cell.as_dict(), metric=kind, value=rate, threshold=limit, n=total)
            checks.append(found)
    return checks


class Rate(GateCheck):
    """One cap of `rate_checks`: `error_rate` or `invalid_rate`."""

    order = 20

    def __init__(self, kind: str):
        self.kind = kind

    def results(self, inputs: GateInputs) -> list[Check]:
        finished = inputs.run.manifest.status == "complete"
        return [c for c in rate_checks(inputs.run.samples, inputs.policy, finished) if c.kind == self.kind]


CHECK = (Rate("error_rate"), Rate("invalid_rate"))  # listed in analysis.checks.CHECKS
