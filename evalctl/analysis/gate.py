"""The gate: every check on a run (and optionally a baseline run) and one verdict.

Verdicts, in order of precedence (exit statuses: `errors.ExitCode`): *regression* when any
check found one; *inconclusive* when none did but some check could not decide (too few questions,
data that neither show the drop beyond the tolerance nor exclude it, an incomplete run, a
comparison with nothing to pair); *pass* only when every check passed.

Accuracy. Each accuracy check compares a candidate cell with its reference cell on the same
questions (cache on vs off, variant vs baseline variant, pass k vs 1, run vs baseline run),
with tolerance tol = `max_accuracy_drop` (rule and references in `drop_rule`):
- regression: Tango's score test rejects H0: drop <= tol (one-sided), Holm-adjusted over
  all accuracy checks of the gate, at level `alpha`. A drop inside the tolerance is never
  evidence of a regression, however significant it is against no drop;
- pass: the same statistic rejects H0: drop >= tol in the cell, and the gate passes only
  if every cell does (intersection-union test);
- inconclusive otherwise, or with fewer than `min_n` pairs; the reason gives the interval
  and the drop the rule would find with 80% power at that n (MDE, `power.mde_beyond_tolerance`).

With an A/A arm (`noise`), a regression must also exceed the engine's measured noise; every
paired check shows it (`analysis.noise` states what that does to the error rates). A comparison
resting on a cell whose cache label did not hold (`cache-engaged`, `analysis.cache_engagement`)
is inconclusive, never a pass. *Warnings* (a cache that saved no time, resolved server settings
that differ from the baseline's) are shown but do not change the verdict.


Guarantees (asymptotic; questions independent, see `drop_rule`): when every true drop is
<= tol, the chance of any false accuracy regression in the gate is <= alpha (Holm 1979,
any dependence between cells); when some true drop is >= tol, the chance of a pass is
<= alpha (Berger 1982). Holm, not Benjamini-Hochberg: a verdict blocks a merge or a
release, so one false "regression" anywhere is the error that costs; BH bounds only the
expected share of false flags, the right trade for exploration (`evalctl analyze`).

Request errors. A candidate's error on a question the reference answered counts as a wrong
answer in the paired test (`pairing.judged_pairs`), so errors cannot hide a drop; the
error-rate check still caps errors on their own.

Unpaired cells. A candidate cell a comparison cannot pair (a baseline run without the cell
or with other prompts) is inconclusive and says why; it is never left out silently.

Cliffs. The length cliff (`cliff`) is reported, not judged: it says where accuracy departs,
and the per-cell accuracy checks decide. Its tail test pools shot counts, so one question
counts once per shot count, which overstates the evidence (about 4% false cliffs at n=200
without any drop); every length a sweep asks is a cell already in the accuracy family.

Throughput. Per-request rank tests of a slowdown beyond `max_throughput_drop`
(`throughput_checks`), the same beyond/within rule, Holm over the throughput checks as
their own family: a false throughput regression is bounded by alpha separately, so a gate
with both families keeps its any-false-regression rate <= 2 alpha.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evalctl.analysis.cliff import find_cliffs, paired_by_length
from evalctl.analysis.completeness import cell_counts
from evalctl.analysis.drop_rule import decide, decide_drops, drop_bounds
from evalctl.analysis.noise import Noise, drop_margin, noise_by_profile
from evalctl.analysis.pairing import RUN_VS_BASELINE, Comparison, between_runs, paired_table, unpaired_cells, within_run
from evalctl.analysis.power import mde_beyond_tolerance
from evalctl.analysis.throughput_checks import MEASURES, slowdown_tests
from evalctl.config import StoppingConfig, StoppingMode
from evalctl.config_files import read_yaml
from evalctl.errors import VERDICT_EXIT, BadInput, ExitCode
from evalctl.manifest import Manifest
from evalctl.records import CELL_KEYS
from evalctl.runs import Run

Status = Literal["pass", "regression", "inconclusive", "warning"]
CheckKind = Literal[
    "completeness",
    "error_rate",
    "invalid_rate",
    "accuracy",
    "throughput",
    "cliff",
    "cache-engaged",
    "cache-speedup",
    "settings",
    "sequential",
]
MDE_POWER = 0.8


class GatePolicy(BaseModel):
    """What the gate tolerates. Rates and drops are fractions (0.03 = 3 points)."""

    model_config = ConfigDict(extra="forbid")

    metric: str | None = Field(
        None, description="The task's metric judged, as the task names it (gsm8k: strict or flexible); default: the task's first."
    )
    max_accuracy_drop: float = Field(0.03, ge=0, lt=1, description="Largest tolerated paired accuracy drop, absolute.")
    alpha: float = Field(
        0.05, gt=0, lt=0.5, description="Largest chance of a false regression (Holm over the accuracy checks) and of a false pass."
    )
    min_n: int = Field(30, ge=1, description="Fewer question pairs (or timed requests) per cell than this: inconclusive.")
    max_invalid_rate: float = Field(0.10, ge=0, le=1, description="Largest share of scored answers with no extractable answer.")
    max_error_rate: float = Field(
        0.02,
        ge=0,
        le=1,
        description="Largest share of requests that got no answer (HTTP errors, timeouts); each also counts as wrong when paired.",
    )
    max_throughput_drop: float | None = Field(
        0.20, ge=0, lt=1, description="Largest tolerated per-request slowdown (fraction of the reference's throughput); null disables."
    )


class PolicyError(BadInput):
    """A gate policy file that cannot be used; the message names the cause."""


def load_policy(path: Path | None = None) -> GatePolicy:
    """The policy in `path`, or the built-in default (the same as the packaged gate/default.yaml)."""
    if path is None:
        return GatePolicy()
    data = read_yaml(path, "gate policy", PolicyError)
    try:
        return GatePolicy.model_validate(data)
    except ValidationError as exc:
        where = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(top level)'}: {e['msg']}" for e in exc.errors())
        raise PolicyError(f"invalid gate policy {path}: {where}") from None


@dataclass
class Check:
    name: str
    kind: CheckKind
    status: Status
    reason: str
    profile: str | None = None
    variant: str | None = None
    cache: str | None = None
    shots: int | None = None
    pass_index: int | None = None
    metric: str | None = None
    value: float | None = None
    threshold: float | None = None
    p_value: float | None = None
    p_adjusted: float | None = None
    b: int | None = None
    c: int | None = None
    n: int | None = None
    comparison: str | None = None  # the paired comparison an accuracy or throughput check belongs to

    @property
    def where(self) -> str:
        """The cell a check judges, for people: 'cpu/default cache=on shots=16 pass=1' (parts it has)."""
        parts = ["/".join(x for x in (self.profile, self.variant) if x)] if self.profile else []
        parts += [f"{k}={v}" for k, v in (("cache", self.cache), ("shots", self.shots), ("pass", self.pass_index)) if v is not None]
        return " ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {k: plain(v) for k, v in asdict(self).items()}


def plain(value: Any) -> Any:
    """A JSON-ready scalar: numpy scalars become Python ones, NaN becomes None (JSON has no NaN)."""
    if hasattr(value, "item"):
        value = value.item()
    return None if isinstance(value, float) and math.isnan(value) else value


@dataclass
class GateResult:
    verdict: Status
    policy: GatePolicy
    run: str
    baseline: str | None
    checks: list[Check]
    cliffs: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def exit_code(self) -> ExitCode:
        return VERDICT_EXIT[self.verdict]


def _cell(row: Any) -> dict[str, Any]:
    return {
        "profile": str(row["profile"]),
        "variant": str(row["variant"]),
        "cache": str(row["cache"]),
        "shots": int(row["shots"]),
        "pass_index": int(row["pass_index"]),
    }


def _paired_drop(row: Any, policy: GatePolicy) -> dict[str, Any]:
    """A paired comparison's figures as a check reports them: the drop, its test, the flips."""
    return {
        "value": float(row["acc_drop"]),
        "threshold": policy.max_accuracy_drop,
        "p_value": float(row["p_value"]),
        "p_adjusted": float(row["p_adjusted"]),
        "b": int(row["b"]),
        "c": int(row["c"]),
        "n": int(row["n"]),
    }


def completeness_checks(run: Run, role: str) -> list[Check]:
    """Not pass when the run stopped early or a planned cell is short of questions."""
    status = run.manifest.status
    checks = []
    if status != "complete":
        checks.append(
            Check(
                f"{role} complete",
                "completeness",
                "inconclusive",
                f"incomplete: run {run.run_id} has status {status!r}, not 'complete'",
            )
        )
    try:
        counts = cell_counts(run.samples, run.manifest.config)
    except ValueError as exc:
        return [*checks, Check(f"{role} cells complete", "completeness", "inconclusive", f"incomplete: cannot tell which cells: {exc}")]
    # A cell the sequential gate decided early holds the questions up to its look: complete.
    stopped = {d.cell for d in run.manifest.decisions if d.saved}
    short = counts[counts["found"] < counts["expected"]]
    for _, row in short[[tuple(k) not in stopped for k in short[CELL_KEYS].itertuples(index=False)]].iterrows():
        checks.append(
            Check(
                f"{role} cell complete",
                "completeness",
                "inconclusive",
                f"incomplete: {row['found']} of {row['expected']} questions recorded",
                **_cell(row),
                metric="questions",
                value=float(row["found"]),
                threshold=float(row["expected"]),
                n=int(row["found"]),
            )
        )
    if not checks:
        decided = f" ({len(stopped)} stopped early, decided)" if stopped else ""
        done = f"all {len(counts)} planned cells have every question{decided}"
        checks.append(Check(f"{role} complete", "completeness", "pass", done))
    return checks


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
    """A sequential run's accuracy verdicts: per cell, its decision against the baseline run,
    when it was made and the requests it saved (`execution.stopping`).

    These replace the fixed-n accuracy checks: the fixed-n rule is not valid on a sample whose
    size the data chose, and a cell that ran to its last look was judged there by the same
    sequential rule, whose error rates hold over all looks together (`analysis.sequential`).
    A cell with rows but no decision (it failed before its last look, or the baseline lacks
    questions its looks need) is inconclusive. As every paired check, a regression must also
    exceed the engine's own A/A noise (`noise.drop_margin`) at the look it was decided.

    The decisions were made with the run's `stopping:` tolerance, alpha, metric and min_n, so
    a policy that differs is refused (`PolicyError`) rather than printed beside them: a sequential
    verdict cannot be re-judged at other values (where the cell stopped depended on them), and
    judging "by the stricter" would mix two rules whose error rates were never proven together.
    """
    differ = stopping_policy_mismatch(run, policy)
    if differ:
        raise PolicyError(
            f"run {run.run_id} was stopped sequentially with other settings than the gate policy ({'; '.join(differ)}): "
            "gate it with a policy that matches its stopping section"
        )
    decided = {d.cell for d in run.manifest.decisions}
    undecided = [
        Check(
            f"{RUN_VS_BASELINE} (sequential)",
            "sequential",
            "inconclusive",
            "no sequential decision: the cell did not reach its last look (too few paired questions, or it failed)",
            **_cell(row),
        )
        for _, row in run.samples[CELL_KEYS].drop_duplicates().iterrows()
        if tuple(row) not in decided
    ]
    checks = []
    for decision in run.manifest.decisions:
        status: Status = decision.reason
        reason = (
            f"{decision.reason} at look {decision.look} after {decision.answered} of {decision.planned} questions"
            f"{', shown by the e-process' if decision.by_e_process else ''}; {decision.saved} requests saved"
        )
        if decision.drift:
            reason += "; the drop differed between early and late questions of the send order (drift), so no early pass"
        profile_noise = (noise or {}).get(decision.profile)
        if decision.n:
            reason += f"; flips {decision.b} right->wrong, {decision.c} wrong->right of {decision.n} pairs"
        if profile_noise is not None:
            reason += f"; {profile_noise.describe()}"
            margin = drop_margin(policy.max_accuracy_drop, policy.alpha, profile_noise)
            drop = (decision.b - decision.c) / decision.n if decision.n else math.nan
            if status == "regression" and not drop > margin:
                status = "inconclusive"
                reason = f"not above tolerance plus the engine's own noise drop = {margin:.3f} (drop {drop:.3f}): {reason}"
        checks.append(
            Check(
                f"{RUN_VS_BASELINE} (sequential)",
                "sequential",
                status,
                reason,
                profile=decision.profile,
                variant=decision.variant,
                cache=decision.cache,
                shots=decision.shots,
                pass_index=decision.pass_index,
                metric="requests saved",
                value=float(decision.saved),
                b=decision.b,
                c=decision.c,
                n=decision.n if decision.n is not None else decision.answered,
            )
        )
    return undecided + checks


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
    bounds = f"drop {row['acc_drop']:.3f}, {1 - 2 * alpha:.0%} interval [{row['drop_lower']:.3f},{row['drop_upper']:.3f}]"
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
    table = paired_table(comparisons, policy.metric)
    decided = decide_drops(table["b"], table["c"], table["n"], policy.max_accuracy_drop, policy.alpha, policy.min_n)
    # The interval inverts the deciding tests (`drop_rule.drop_bounds`): it never contradicts them.
    lower, upper = drop_bounds(table["b"], table["c"], table["n"].clip(lower=1), policy.alpha) if len(table) else ([], [])
    table = table.assign(
        status=decided.status,
        p_value=decided.p_beyond,
        p_adjusted=decided.p_adjusted,
        p_within=decided.p_within,
        drop_lower=lower,
        drop_upper=upper,
    )
    tests = int(decided.tests) if len(table) else 0
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
                **_cell(row),
                metric=f"{policy.metric} accuracy drop",
                **_paired_drop(row, policy),
                comparison=row["comparison"],
            )
        )
    for comp in comparisons:
        for _, row in unpaired_cells(comp, policy.metric).iterrows():
            checks.append(Check(comp.name, "accuracy", "inconclusive", f"nothing to pair: {row['reason']}", **_cell(row)))
    return checks


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
                **_cell(row),
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


def cliffs(samples: pd.DataFrame, policy: GatePolicy) -> pd.DataFrame:
    """Cliffs along prompt tokens and cached tokens, cache on vs off (empty without both modes)."""
    cache = [c for c in within_run(samples) if c.kind == "cache"]
    if not cache:
        return find_cliffs(pd.DataFrame(), "prompt_tokens", policy.max_accuracy_drop, policy.alpha)
    found = [
        find_cliffs(paired_by_length(cache[0], column, policy.metric), column, policy.max_accuracy_drop, policy.alpha, policy.min_n)
        for column in ("prompt_tokens", "cached_tokens")
    ]
    return pd.concat([f for f in found if not f.empty] or found[:1], ignore_index=True)


def baseline_variant(manifest: Manifest) -> str | None:
    """The config's first variant is the baseline the others are compared with."""
    return _first_name(manifest, "variants")


def baseline_profile(manifest: Manifest) -> str | None:
    """The config's first server profile is the reference the others are compared with."""
    return _first_name(manifest, "servers")


def _first_name(manifest: Manifest, section: str) -> str | None:
    entries = manifest.config.get(section) or []
    return entries[0].get("name") if entries and isinstance(entries[0], dict) else None


def evaluate(run: Run, policy: GatePolicy, baseline: Run | None = None) -> GateResult:
    """Every check on `run` (and against `baseline`, if given) and the verdict.

    The result's policy names the metric judged: the policy's, else the run's task's first.
    """
    policy = policy.model_copy(update={"metric": run.metric(policy.metric)})
    comparisons = within_run(run.samples, baseline_variant(run.manifest), baseline_profile(run.manifest))
    if baseline is not None:
        comparisons.append(between_runs(baseline.samples, run.samples))
    checks = completeness_checks(run, "run")
    if baseline is not None:
        checks += completeness_checks(baseline, "baseline")
    checks += rate_checks(run.samples, policy)
    noise = noise_by_profile(run.samples, run.noise, policy.metric)
    sequential = run.manifest.config.get("stopping", {}).get("mode") == StoppingMode.sequential.value
    accuracy = sequential_checks(run, policy, noise) if sequential else accuracy_checks(comparisons, policy, noise)
    if not accuracy:
        accuracy = [
            Check(
                "paired comparison",
                "accuracy",
                "inconclusive",
                "nothing to compare: the run has no cache on/off, variant, profile or pass pairs, and no baseline run shares its cells",
            )
        ]
    checks += accuracy
    checks += throughput_checks(comparisons, policy)
    cliff_table = cliffs(run.samples, policy)  # where accuracy departs: described, never a verdict
    # Imported here: these modules build this module's Checks.
    from evalctl.analysis.trust_checks import trust_checks

    checks = trust_checks(checks, run, comparisons, baseline)
    statuses = {c.status for c in checks}
    verdict: Status = "regression" if "regression" in statuses else "inconclusive" if "inconclusive" in statuses else "pass"
    return GateResult(verdict, policy, run.run_id, baseline.run_id if baseline else None, checks, cliff_table)
