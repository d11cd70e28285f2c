"""The sequential run's accuracy verdicts: each cell's decision against the baseline run (`execution.stopping`)."""

from __future__ import annotations

import math

from evalctl.analysis.checks.accuracy import nothing_to_compare
from evalctl.analysis.checks.base import Check, GateCheck, GateInputs
from evalctl.analysis.gate_policy import GatePolicy
from evalctl.analysis.noise import Noise, beyond_noise
from evalctl.analysis.pairing import RUN_VS_BASELINE
from evalctl.cell import CellKey
from evalctl.errors import BadInput
from evalctl.manifest import CellDecision
from evalctl.runs import Run
from evalctl.schema import StoppingConfig


def stopping_policy_mismatch(run: Run, policy: GatePolicy) -> list[str]:
    """Where the gate policy (its metric resolved) differs from the `stopping:` section the run was decided by."""
    stopped = StoppingConfig.model_validate(run.manifest.config.get("stopping", {}))
    stopped = stopped.model_copy(update={"metric": run.metric(stopped.metric)})
    pairs = (("tolerance", "max_accuracy_drop"), ("alpha", "alpha"), ("metric", "metric"), ("min_n", "min_n"))
    return [
        f"stopping.{ours}={getattr(stopped, ours)!r} vs policy {theirs}={getattr(policy, theirs)!r}"
        for ours, theirs in pairs
        if getattr(stopped, ours) != getattr(policy, theirs)
    ]


def sequential_checks(run: Run, policy: GatePolicy, noise: dict[str, Noise] | None = None) -> list[Check]:
    """Per cell, its sequential decision against the baseline run (`execution.stopping`), in place of the fixed-n
    checks, not valid on a sample whose size the data chose; a cell with rows but no decision (it failed before its
    last look, or the baseline lacks questions its looks need) is inconclusive. A policy whose tolerance, alpha,
    metric or min_n differ from the run's `stopping:` is bad input: where a cell stopped depended on them, and
    judging "by the stricter" would mix two rules whose error rates were never proven together."""
    differ = stopping_policy_mismatch(run, policy)
    if differ:
        raise BadInput(
            f"run {run.run_id} was stopped sequentially with other settings than the gate policy ({'; '.join(differ)}): "
            "gate it with a policy that matches its stopping section"
        )
    decided = {d.cell for d in run.manifest.decisions}
    why = "no sequential decision: the cell did not reach its last look (too few paired questions, or it failed)"
    undecided = [
        Check(f"{RUN_VS_BASELINE} (sequential)", "sequential", "inconclusive", why, **cell.as_dict())
        for cell in CellKey.in_frame(run.samples)
        if cell not in decided
    ]
    return undecided + [decision_check(d, policy, (noise or {}).get(d.profile)) for d in run.manifest.decisions]


def decision_check(decision: CellDecision, policy: GatePolicy, profile_noise: Noise | None) -> Check:
    """One cell's sequential decision as a finding; a regression must also exceed the engine's A/A noise."""
    status = decision.verdict
    reason = (
        f"{decision.verdict} at look {decision.look} after {decision.answered} of {decision.planned} questions"
        f"{', shown by the e-process' if decision.by_e_process else ''}; {decision.saved} requests saved"
    )
    if decision.drift:
        reason += "; the drop differed between early and late questions of the send order (drift), so no early pass"
    if decision.n:
        reason += f"; flips {decision.b} right->wrong, {decision.c} wrong->right of {decision.n} pairs"
    if profile_noise is not None:
        drop = (decision.b - decision.c) / decision.n if decision.n else math.nan
        reason = f"{reason}; {profile_noise.describe()}"
        status, reason = beyond_noise(status, reason, drop, policy.max_accuracy_drop, policy.alpha, profile_noise)
    return Check(
        f"{RUN_VS_BASELINE} (sequential)",
        "sequential",
        status,
        reason,
        **decision.cell.as_dict(),
        metric="requests saved",
        value=float(decision.saved),
        b=decision.b,
        c=decision.c,
        n=decision.n if decision.n is not None else decision.answered,
    )


class Sequential(GateCheck):
    kind = "sequential"
    order = 30
    family = "accuracy"  # decided by the sequential rule, whose error rates hold over all looks and cells

    def results(self, inputs: GateInputs) -> list[Check]:
        if not inputs.sequential:
            return []
        return sequential_checks(inputs.run, inputs.policy, inputs.noise) or nothing_to_compare()


CHECK = Sequential()  # listed in analysis.checks.CHECKS
