"""The gate: every check on a run (and optionally a baseline run) and one verdict.

Verdicts, in order of precedence: *regression* (exit 1) when any check found one;
*inconclusive* (exit 2) when none did but some check could not decide (too few questions,
an interval too wide to exclude the tolerated drop, an incomplete run); *pass* (exit 0)
only when every check passed.

An accuracy check compares a candidate cell with its reference cell on the same questions:
- regression: exact one-sided McNemar p, Holm-adjusted over all accuracy checks of the gate,
  is <= alpha, and the observed paired drop exceeds `max_accuracy_drop`;
- pass: the one-sided (1 - alpha) upper bound on the drop (Tango score, `power.can_exclude_drop`)
  is below `max_accuracy_drop`. Passing needs *every* cell to exclude the drop, an
  intersection-union test, which keeps its level without adjustment;
- inconclusive otherwise, or with fewer than `min_n` scored pairs; the reason gives the upper
  bound and the minimum detectable effect (MDE) at that n.

With an A/A arm (`noise`), a regression must also exceed the engine's measured noise; every
paired check shows it (`analysis.noise` states what that does to the error rates). A comparison
resting on a cell whose cache label did not hold (`cache-engaged`, `analysis.cache_engagement`)
is inconclusive, never a pass. *Warnings* (a cache that saved no time, resolved server settings
that differ from the baseline's) are shown but do not change the verdict.

Multiple comparisons: Holm, not Benjamini-Hochberg. A gate verdict blocks a merge or a release,
so one false "regression" anywhere in a sweep is the error that costs; Holm bounds the chance
of any false regression (family-wise error) under any dependence between cells, and cells of a
sweep are dependent (same questions, same server). BH bounds only the expected share of false
flags, the right trade for exploration (`evalctl analyze` tables), not for a gate.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import pandas as pd
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evalctl.analysis.accuracy import GROUP as CELL
from evalctl.analysis.cliff import find_cliffs, paired_by_length
from evalctl.analysis.completeness import cell_counts
from evalctl.analysis.multiple import holm
from evalctl.analysis.noise import Noise, drop_margin, noise_by_profile
from evalctl.analysis.pairing import Comparison, between_runs, paired_table, within_run
from evalctl.analysis.power import can_exclude_drop, mde_paired
from evalctl.analysis.throughput import throughput_table
from evalctl.analysis.throughput_checks import RATES, throughput_ratios

Status = Literal["pass", "regression", "inconclusive", "warning"]
EXIT_CODES = {"pass": 0, "regression": 1, "inconclusive": 2}
DEFAULT_POLICY_FILE = Path(__file__).resolve().parents[2] / "configs" / "gate" / "default.yaml"
MDE_POWER = 0.8


class GatePolicy(BaseModel):
    """What the gate tolerates. Rates and drops are fractions (0.03 = 3 points)."""

    model_config = ConfigDict(extra="forbid")

    metric: Literal["strict", "flexible"] = Field("strict", description="GSM8K answer extraction scored: strict (#### N) or flexible.")
    max_accuracy_drop: float = Field(0.03, ge=0, lt=1, description="Largest tolerated paired accuracy drop, absolute.")
    alpha: float = Field(0.05, gt=0, lt=1, description="Significance level, after Holm adjustment across cells.")
    min_n: int = Field(30, ge=1, description="Fewer scored pairs per cell than this: inconclusive.")
    max_invalid_rate: float = Field(0.10, ge=0, le=1, description="Largest share of scored answers with no extractable answer.")
    max_error_rate: float = Field(0.02, ge=0, le=1, description="Largest share of requests that got no answer (HTTP errors, timeouts).")
    max_throughput_drop: float | None = Field(
        0.20, ge=0, lt=1, description="Largest tolerated slowdown (fraction of the reference's throughput); null disables."
    )


class PolicyError(ValueError):
    """A gate policy file that cannot be used; the message names the cause."""


def load_policy(path: Path | None = None) -> GatePolicy:
    """The policy in `path`, or the built-in default (the same as configs/gate/default.yaml)."""
    if path is None:
        return GatePolicy()
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise PolicyError(f"cannot read gate policy {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise PolicyError(f"invalid YAML in gate policy {path}: {exc}") from None
    try:
        return GatePolicy.model_validate(data or {})
    except ValidationError as exc:
        where = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(top level)'}: {e['msg']}" for e in exc.errors())
        raise PolicyError(f"invalid gate policy {path}: {where}") from None


@dataclass
class Check:
    name: str
    kind: str  # completeness | error_rate | invalid_rate | accuracy | throughput | cliff | cache-engaged | cache-speedup | settings
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


@dataclass(frozen=True)
class RunFrames:
    """What the gate needs of a run: its id, samples and manifest."""

    run_id: str
    samples: pd.DataFrame
    manifest: dict
    noise: pd.DataFrame = field(default_factory=pd.DataFrame)  # the A/A replica's records, when the run had one


@dataclass
class GateResult:
    verdict: Status
    policy: GatePolicy
    run: str
    baseline: str | None
    checks: list[Check]
    cliffs: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]


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


def completeness_checks(run: RunFrames, role: str) -> list[Check]:
    """Not pass when the run stopped early or a planned cell is short of questions."""
    status = run.manifest.get("status")
    checks = []
    if status != "complete":
        checks.append(
            Check(
                f"{role} run complete",
                "completeness",
                "inconclusive",
                f"incomplete: run {run.run_id} has status {status!r}, not 'complete'",
            )
        )
    try:
        counts = cell_counts(run.samples, run.manifest.get("config") or {})
    except ValueError as exc:
        return [*checks, Check(f"{role} cells complete", "completeness", "inconclusive", f"incomplete: cannot tell which cells: {exc}")]
    for _, row in counts[counts["found"] < counts["expected"]].iterrows():
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
        checks.append(Check(f"{role} run complete", "completeness", "pass", f"all {len(counts)} planned cells have every question"))
    return checks


def rate_checks(samples: pd.DataFrame, policy: GatePolicy) -> list[Check]:
    """Request errors and unextractable answers, per cell, against the policy's maxima."""
    checks = []
    for key, group in samples.groupby(CELL, sort=True):
        cell = dict(zip(CELL, key))
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


def _accuracy_status(row: pd.Series, policy: GatePolicy, noise: Noise | None = None) -> tuple[Status, str]:
    tol, n, b, c = policy.max_accuracy_drop, int(row["n"]), int(row["b"]), int(row["c"])
    versus = (
        f"{row['cand_acc']:.3f} [{row['cand_lo']:.3f},{row['cand_hi']:.3f}] vs {row['reference']} "
        f"{row['ref_acc']:.3f} [{row['ref_lo']:.3f},{row['ref_hi']:.3f}]; flips {b} right->wrong, {c} wrong->right"
    )
    if noise is not None:
        versus += f"; {noise.describe()}"
    if n < policy.min_n:
        return "inconclusive", f"only {n} scored pairs (min_n {policy.min_n}); {versus}"
    if row["p_adjusted"] <= policy.alpha and row["acc_drop"] > tol:
        margin = drop_margin(tol, policy.alpha, noise)
        if row["acc_drop"] <= margin:
            return "inconclusive", (
                f"drop {row['acc_drop']:.3f} > {tol:.3f} (p_adj {row['p_adjusted']:.2g}) but not above tolerance plus the engine's "
                f"own noise drop (upper bound {margin - tol:.3f}) = {margin:.3f}; {versus}"
            )
        return "regression", f"drop {row['acc_drop']:.3f} > {margin:.3f}, p_adj {row['p_adjusted']:.2g} <= {policy.alpha}; {versus}"
    if can_exclude_drop(b, c, n, tol, policy.alpha):
        return "pass", f"drop <= {row['drop_upper']:.3f} (upper {1 - policy.alpha:.0%}) < {tol:.3f}; {versus}"
    discordance = (b + c) / n if b + c else 0.1
    mde = mde_paired(n, discordance, policy.alpha, MDE_POWER).mde
    return "inconclusive", (f"cannot exclude a drop of {tol:.3f}: upper bound {row['drop_upper']:.3f}, MDE {mde:.3f} at n={n}; {versus}")


def accuracy_checks(comparisons: list[Comparison], policy: GatePolicy, noise: dict[str, Noise] | None = None) -> list[Check]:
    """One check per candidate cell of each comparison; `noise` (by profile) from the run's A/A arm."""
    table = paired_table(comparisons, policy.metric)
    tested = table["n"] >= policy.min_n
    table["p_adjusted"] = float("nan")
    if tested.any():
        table.loc[tested, "p_adjusted"] = holm(table.loc[tested, "p_value"].to_numpy(dtype=float))
    checks = []
    for _, row in table.iterrows():
        status, reason = _accuracy_status(row, policy, (noise or {}).get(str(row["profile"])))
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
    return checks


def throughput_checks(comparisons: list[Comparison], policy: GatePolicy) -> list[Check]:
    if policy.max_throughput_drop is None:
        return []
    tol = policy.max_throughput_drop
    checks = []
    for _, row in throughput_ratios(comparisons).iterrows():
        n = int(min(row["ref_requests"], row["cand_requests"]))
        rate = row["measure"] in RATES
        # Ratio threshold in the measure's own direction: rates may fall to 1 - tol, latencies rise to 1 / (1 - tol).
        threshold = 1 - tol if rate else 1 / (1 - tol)
        detail = f"{row['measure']} {row['cand_value']:.3g} vs {row['reference']} {row['ref_value']:.3g} (ratio {row['ratio']:.2f})"
        if n < policy.min_n:
            status: Status = "inconclusive"
            reason = f"only {n} requests timed (min_n {policy.min_n}); {detail}"
        elif row["slowdown"] > tol:
            status, reason = "regression", f"slowdown {row['slowdown']:.1%} > {tol:.0%}; {detail}"
        else:
            status, reason = "pass", f"slowdown {row['slowdown']:.1%} <= {tol:.0%}; {detail}"
        checks.append(
            Check(
                f"{row['comparison']}: {row['measure']}",
                "throughput",
                status,
                reason,
                **_cell(row),
                metric=f"{row['measure']} ratio",
                value=float(row["ratio"]),
                threshold=threshold,
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


def cliff_checks(table: pd.DataFrame, policy: GatePolicy, noise: dict[str, Noise] | None = None) -> list[Check]:
    checks = []
    for _, row in table.iterrows():
        what = "prompt" if row["column"] == "prompt_tokens" else "cached"
        reason = (
            f"cache-on accuracy falls from {what} length bin {row['bin']} (shortest seen {row['min_tokens']} tokens): "
            f"drop {row['acc_drop']:.3f} > {policy.max_accuracy_drop:.3f} over {row['n']} pairs onwards, p_adj {row['p_adjusted']:.2g}"
        )
        profile_noise = (noise or {}).get(str(row["profile"]))
        status: Status = "regression"
        if profile_noise is not None:
            reason += f"; {profile_noise.describe()}"
            margin = drop_margin(policy.max_accuracy_drop, policy.alpha, profile_noise)
            if row["acc_drop"] <= margin:
                status, reason = "inconclusive", f"not above tolerance plus the engine's own noise drop ({margin:.3f}): {reason}"
        checks.append(
            Check(
                f"{what}-length cliff",
                "cliff",
                status,
                reason,
                profile=row["profile"],
                variant=row["variant"],
                cache="on",
                pass_index=int(row["pass_index"]),
                metric=f"{row['column']} bin {row['bin']}",
                **_paired_drop(row, policy),
            )
        )
    return checks


def baseline_variant(manifest: dict) -> str | None:
    """The config's first variant is the baseline the others are compared with."""
    variants = (manifest.get("config") or {}).get("variants") or []
    return variants[0].get("name") if variants and isinstance(variants[0], dict) else None


def evaluate(run: RunFrames, policy: GatePolicy, baseline: RunFrames | None = None) -> GateResult:
    """Every check on `run` (and against `baseline`, if given) and the verdict."""
    comparisons = within_run(run.samples, baseline_variant(run.manifest))
    if baseline is not None:
        comparisons.append(between_runs(baseline.samples, run.samples))
    checks = completeness_checks(run, "run")
    if baseline is not None:
        checks += completeness_checks(baseline, "baseline")
    checks += rate_checks(run.samples, policy)
    noise = noise_by_profile(run.samples, run.noise, policy.metric)
    accuracy = accuracy_checks(comparisons, policy, noise)
    if not accuracy:
        accuracy = [
            Check(
                "paired comparison",
                "accuracy",
                "inconclusive",
                "nothing to compare: the run has no cache on/off, variant or pass pairs, and no baseline run shares its cells",
            )
        ]
    checks += accuracy
    tp_comparisons = [replace(c, reference=throughput_table(c.reference), candidate=throughput_table(c.candidate)) for c in comparisons]
    checks += throughput_checks(tp_comparisons, policy)
    cliff_table = cliffs(run.samples, policy)
    checks += cliff_checks(cliff_table, policy, noise)
    # Imported here: these modules build this module's Checks.
    from evalctl.analysis.trust_checks import trust_checks

    checks = trust_checks(checks, run, comparisons, baseline)
    statuses = {c.status for c in checks}
    verdict: Status = "regression" if "regression" in statuses else "inconclusive" if "inconclusive" in statuses else "pass"
    return GateResult(verdict, policy, run.run_id, baseline.run_id if baseline else None, checks, cliff_table)
