"""Caps per cell: the share of requests that failed, and of answers with nothing the metric could extract."""

from __future__ import annotations

import pandas as pd

from evalctl.analysis.checks import Check, GateCheck, GateInputs, Status, register_check
from evalctl.analysis.gate_policy import GatePolicy
from evalctl.records import CELL_KEYS


def rate_checks(samples: pd.DataFrame, policy: GatePolicy) -> list[Check]:
    """Request errors and unextractable answers, per cell, against the policy's maxima."""
    checks = []
    for key, group in samples.groupby(CELL_KEYS, sort=True):
        cell = dict(zip(CELL_KEYS, key))
        cell = {**cell, "shots": int(cell["shots"]), "pass_index": int(cell["pass_index"])}
        errors = int(group["error"].notna().sum())
        scored = group[group["error"].isna()]
        invalid = int(scored[f"{policy.metric}_answer"].isna().sum())
        for kind, count, total, limit, what in (
            ("error_rate", errors, len(group), policy.max_error_rate, "requests failed"),
            ("invalid_rate", invalid, len(scored), policy.max_invalid_rate, f"answers had no {policy.metric} answer"),
        ):
            rate = count / total if total else float("nan")
            status: Status = "pass" if total and rate <= limit else "regression" if total else "inconclusive"
            reason = f"{count} of {total} {what} ({rate:.1%}; max {limit:.1%})" if total else "no scored answers"
            checks.append(Check(kind.replace("_", " "), kind, status, reason, **cell, metric=kind, value=rate, threshold=limit, n=total))
    return checks


class Rate(GateCheck):
    """One cap of `rate_checks`: `error_rate` or `invalid_rate`."""

    order = 20

    def __init__(self, kind: str):
        self.kind = kind

    def results(self, inputs: GateInputs) -> list[Check]:
        return [c for c in rate_checks(inputs.run.samples, inputs.policy) if c.kind == self.kind]


register_check(Rate("error_rate"))
register_check(Rate("invalid_rate"))
