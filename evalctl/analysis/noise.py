"""The engine's own noise: an A/A arm, the reference cell run twice, cold, on the same server.

With nothing changed, a question whose outcome differs between the two runs is noise (GPU engines
are not batch-invariant). Per profile, builds pooled, the arm (`noise: true`, records in
`noise-<profile>-<variant>.jsonl`) gives the discordance (b0 + c0) / n0 and the noise drop
(b0 - c0) / n0, the accuracy lost to noise alone (not symmetric: mostly-right answers have more
right ones to break than wrong to fix).

The gate (`checks.accuracy`, `checks.sequential`) calls a regression only when the paired drop,
beyond passing the regression test (`drop_rule`), is above `max_accuracy_drop + max(0, U)`, U the
one-sided (1 - alpha) upper bound on the noise drop (normal approximation: drop + z sqrt(((b0 +
c0)/n0 - drop^2) / n0); no flips give U = 0, the plain rule).

- False regression: the margin only turns would-be regressions into inconclusive, so the rate
  stays <= alpha wherever the gate's null holds (true drop <= tolerance, no engine change). Noise
  alone breaks that null (the tolerance-shifted test calls it a regression ever more surely as n
  grows); the upper bound, not the point estimate, brings the rate back under alpha
  (`scripts/sim_noise_rule.py`, figures in docs/statistics.md). Assumptions: the arm's noise is
  the comparison's (same engine, same kind of cell); n0 large enough for the normal approximation
  (tens of flips).
- False pass: the pass rule is unchanged, so is its rate; the price is power.
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
