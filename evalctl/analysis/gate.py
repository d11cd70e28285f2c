"""The gate: every registered check on a run (and optionally a baseline run) and one verdict.

Each kind of check is a `GateCheck` under `analysis.checks`, its rule and guarantee in its module's docstring
(docs/gate.md and docs/statistics.md for people). Verdicts, by precedence (exit statuses: `errors.ExitCode`):
*regression* when any check found one; *inconclusive* when none did but some check could not decide (never left out
silently); *pass* only when every check passed. *Warnings* are shown but change no verdict. The result names the
evidence a regression or an inconclusive verdict rests on (`analysis.evidence`).

Guarantees (questions independent; exact by enumeration at alpha 0.05, tolerance 0.03, n 30-5,000, approximate
elsewhere: `drop_rule`): when every true drop is <= tol, the chance of any false accuracy regression is <= alpha
(Holm 1979, any dependence between cells); when some true drop is >= tol, the chance of a pass is <= alpha (Berger
1982). Holm, not Benjamini-Hochberg: one false "regression" anywhere is the error that costs a merge or a release.
Throughput and first-attempt checks are Holm families of their own, so a gate keeps its any-false-regression rate
<= 3 alpha, plus alpha for each build the agreement floor judges (`analysis.floor`). The A/A noise margin
(`analysis.noise`) only turns would-be regressions into inconclusive; the length cliff (`cliff`) is described,
never judged.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pandas as pd

from evalctl.analysis.checks import registered_checks
from evalctl.analysis.checks.base import Check, GateInputs, Status, plain, verdict_of
from evalctl.analysis.cliff import CLIFF_COLUMNS, find_cliffs, paired_by_length
from evalctl.analysis.evidence import Evidence, deciding_evidence
from evalctl.analysis.gate_policy import GatePolicy, load_policy
from evalctl.analysis.noise import noise_by_profile
from evalctl.analysis.pairing import between_runs, within_run
from evalctl.errors import VERDICT_EXIT, ExitCode
from evalctl.manifest import Manifest
from evalctl.runs import Run
from evalctl.schema import StoppingMode

# What callers of the gate name from here: the policy and the findings' types.
__all__ = ["Check", "GatePolicy", "GateResult", "Status", "evaluate", "load_policy", "plain"]


@dataclass
class GateResult:
    verdict: Status
    policy: GatePolicy
    run: str
    baseline: str | None
    checks: list[Check]
    cliffs: pd.DataFrame = field(default_factory=pd.DataFrame)
    evidence: Evidence | None = None  # what decided the verdict (`analysis.evidence`)

    @property
    def exit_code(self) -> ExitCode:
        return VERDICT_EXIT[self.verdict]


def cliffs(samples: pd.DataFrame, policy: GatePolicy) -> pd.DataFrame:
    """Cliffs along prompt tokens and cached tokens, cache on vs off (empty without both modes)."""
    found = [
        find_cliffs(paired_by_length(cache, column, policy.metric), column, policy.max_accuracy_drop, policy.alpha, policy.min_n)
        for cache in within_run(samples)
        if cache.kind == "cache"  # one at most: on vs off
        for column in ("prompt_tokens", "cached_tokens")
    ]
    return pd.concat([f for f in found if not f.empty] or [pd.DataFrame(columns=CLIFF_COLUMNS)], ignore_index=True)


def baseline_variant(manifest: Manifest, section: str = "variants") -> str | None:
    """The config's first entry of `section` (variants, servers): the reference the others are compared with."""
    entries = manifest.config.get(section) or []
    return entries[0].get("name") if entries and isinstance(entries[0], dict) else None


def gate_inputs(run: Run, policy: GatePolicy, baseline: Run | None = None) -> GateInputs:
    """What every check reads; the policy's metric resolved to the run's (default: its task's first)."""
    policy = policy.for_run(run)
    comparisons = within_run(run.samples, baseline_variant(run.manifest), baseline_variant(run.manifest, "servers"))
    if baseline is not None:
        baseline.metric(policy.metric)  # scored the same way (a derived metric's columns added)
        comparisons.append(between_runs(baseline.samples, run.samples))
    sequential = run.manifest.config.get("stopping", {}).get("mode") == StoppingMode.sequential.value
    noise = noise_by_profile(run.samples, run.noise, policy.metric)
    return GateInputs(run, baseline, policy, comparisons, noise, sequential)


def evaluate(run: Run, policy: GatePolicy, baseline: Run | None = None) -> GateResult:
    """Every registered check on `run` (and against `baseline`), in order, and the verdict. Each check may revise the
    findings before it (a failed cache label makes the comparisons resting on it inconclusive), then adds its own."""
    inputs = gate_inputs(run, policy, baseline)
    checks: list[Check] = []
    for check in registered_checks(inputs.policy):
        check.settings_of(inputs.policy)  # a bad section fails before any finding
        mine = [c if c.family is not None else replace(c, family=check.family) for c in check.results(inputs)]
        checks = check.revise(inputs, checks) + mine
    cliff_table = cliffs(run.samples, inputs.policy)  # where accuracy departs: described, never a verdict
    verdict = verdict_of(c.status for c in checks)
    evidence = deciding_evidence(verdict, checks, inputs.comparisons)
    return GateResult(verdict, inputs.policy, run.run_id, baseline.run_id if baseline else None, checks, cliff_table, evidence)
