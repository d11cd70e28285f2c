"""The engine's own noise: an A/A arm, the reference cell run twice, cold, on the same server.

With nothing changed, any question whose outcome differs between the two runs is noise:
GPU engines are not batch-invariant, so the order and company a request is batched with
change its numerics. The arm (`noise: true`, records in `noise-<profile>-<variant>.jsonl`) yields per profile (its builds pooled):

- discordance: the share of questions that flipped, (b0 + c0) / n0;
- asymmetry (the noise drop): (b0 - c0) / n0, the accuracy lost to noise alone. Noise is
  not symmetric in general: when most answers are right, a perturbation has more right
  answers to break than wrong ones to fix.

How the gate uses it (`gate.accuracy_checks`): a regression must exceed the tolerance *and*
the measured noise: besides the gate's regression test (`drop_rule`), the paired drop must
be above `max_accuracy_drop + max(0, U)`, U the one-sided (1 - alpha) upper
bound on the noise drop (normal approximation: drop + z * sqrt(((b0 + c0)/n0 - drop^2) / n0);
zero flips give U = 0, so a deterministic engine gets the plain rule). Error rates:

- false regression: the extra condition only turns would-be regressions into inconclusive,
  so the family-wise rate stays <= alpha wherever the gate's null holds (a true drop <= the
  tolerance with no engine change; `drop_rule`). Noise breaks that null on its own: when most
  answers are right, a re-run has more right answers to break than wrong ones to fix, so the
  candidate loses accuracy against the reference run with nothing changed (0.6 q at accuracy
  0.8 and q flips each way), and the tolerance-shifted test alone calls that a regression,
  ever more surely as n grows. Subtracting the noise drop's point estimate is not enough (the
  arm underestimates it half the time); its upper bound brings the rate back under alpha.
  `scripts/sim_noise_rule.py` simulates the gate's test (`drop_rule.p_beyond_tolerance`) with
  no margin, with the point estimate and with this rule, at 0-15% flips each way, n = 200.
  Assumptions: the arm's noise is the comparison's (same engine, same kind of cell), and
  n0 large enough for the normal approximation (tens of flips).
- false pass: the pass rule (upper bound on the drop below the tolerance) is unchanged, so
  its rate is unchanged; the price is power: more inconclusive verdicts on a noisy engine.

On CPU llama.cpp is deterministic: the arm finds no flips, and the rule is the plain one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
from scipy.stats import norm

from evalctl.analysis.pairing import Comparison, Metric, paired_table
from evalctl.records import CELL_KEYS


@dataclass(frozen=True)
class Noise:
    """One profile's A/A figures: b0 right->wrong and c0 wrong->right flips among n0 paired questions."""

    profile: str
    cell: str
    n: int
    b: int
    c: int

    @property
    def discordance(self) -> float:
        return (self.b + self.c) / self.n if self.n else float("nan")

    @property
    def drop(self) -> float:
        """The accuracy lost to noise alone (negative when noise happened to gain)."""
        return (self.b - self.c) / self.n if self.n else float("nan")

    def drop_upper(self, alpha: float) -> float:
        """One-sided (1 - alpha) upper confidence bound on the noise drop (Wald, paired proportions)."""
        if not self.n:
            return float("nan")
        variance = max(0.0, (self.discordance - self.drop**2) / self.n)
        return self.drop + norm.ppf(1 - alpha) * math.sqrt(variance)

    def describe(self) -> str:
        flipped = f"{self.b + self.c}/{self.n} flipped ({self.discordance:.1%})"
        return f"A/A noise ({self.cell}): {flipped}, {self.b} right->wrong, {self.c} wrong->right"


def drop_margin(tolerance: float, alpha: float, noise: Noise | None) -> float:
    """The drop a regression must exceed: the tolerance plus what the engine may lose to its own noise (upper bound)."""
    return tolerance + max(0.0, noise.drop_upper(alpha)) if noise is not None else tolerance


def beyond_noise(status: str, reason: str, drop: float, tolerance: float, alpha: float, noise: Noise | None) -> tuple[str, str]:
    """A finding's status and reason with the engine's own noise counted: a regression whose `drop` is not above
    `drop_margin` becomes inconclusive, and says why."""
    margin = drop_margin(tolerance, alpha, noise)
    if status != "regression" or drop > margin:
        return status, reason
    why = f"not above tolerance plus the engine's own noise drop (upper bound {margin - tolerance:.3f}) = {margin:.3f} (drop {drop:.3f})"
    return "inconclusive", f"{why}: {reason}"


def noise_by_profile(samples: pd.DataFrame, replica: pd.DataFrame, metric: Metric) -> dict[str, Noise]:
    """Each profile's noise: its A/A replica paired with the first run of the same cell."""
    if replica.empty:
        return {}
    table = paired_table([Comparison("noise", "A/A replica vs first run", samples, replica, tuple(CELL_KEYS), "first run")], metric)
    out = {}
    for profile, rows in table.groupby("profile"):
        cells = ", ".join(f"{r.variant} cache={r.cache} shots={r.shots}" for r in rows.itertuples())
        out[str(profile)] = Noise(str(profile), cells, int(rows["n"].sum()), int(rows["b"].sum()), int(rows["c"].sum()))
    return out
