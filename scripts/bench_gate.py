"""Simulate the gate's accuracy rule on paired runs: today's rule beside the one evalctl applies.

    PYTHONPATH=. python scripts/bench_gate.py [--runs 2000] [--seed 0]

Each simulated gate has 13 cells (shot counts) of n questions (200 and 1319), cache-off
accuracy 0.9. In every cell a question flips at random both ways with probability
discordance / 2 each (0.036 and 0.09: cache and engine noise), and a true drop d adds d to
the right->wrong direction: p_b = q + d, p_c = q. The cells are independent draws.

Rules, both with tolerance 0.03 and alpha 0.05, verdict over the 13 cells as the gate forms it
(any regression: regression; all pass: pass; else inconclusive):
- before: exact one-sided McNemar against no drop, Holm over the cells, and an observed drop
  above the tolerance (the rule before issue 12; its length-cliff check, which could only add
  regressions, is left out);
- now: `evalctl.analysis.drop_rule.decide_drops`, the tolerance-shifted Tango score tests.
Both pass a cell when the Tango test rejects drop >= tolerance.

Then the minimum detectable effect: the MDE the gate prints for an inconclusive cell
(`power.mde_beyond_tolerance`, Holm over 13 checks) beside the drop that one cell among 13
(the others without a drop) must have for the simulated rule to call it a regression in 80%
of runs, and the same for the old printed MDE (`mde_paired` below) and the old rule.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.stats import binom

from evalctl.analysis.drop_rule import decide_drops, p_within_tolerance
from evalctl.analysis.intervals import wilson_interval
from evalctl.analysis.multiple import holm_rows
from evalctl.analysis.power import _z_values, mde_beyond_tolerance

CELLS, TOL, ALPHA, POWER = 13, 0.03, 0.05, 0.8
SIZES, DISCORDANCES, DROPS = (200, 1319), (0.036, 0.09), (0.0, 0.02, 0.03, 0.05, 0.20)

Rule = Callable[[np.ndarray, np.ndarray, int], np.ndarray]


@dataclass(frozen=True)
class PairedMDE:
    """Smallest paired accuracy drop detectable with the given power; `mde` is inf when none is (the run is
    too small even if every discordant pair went the wrong way)."""

    n: int
    discordance_rate: float
    alpha: float
    power: float
    mde: float


def mde_paired(n: int, discordance_rate: float = 0.1, alpha: float = 0.05, power: float = 0.8) -> PairedMDE:
    """Minimum detectable accuracy drop for a paired (McNemar) comparison: Connor's (1987) sample size
    n = (z_a sqrt(pd) + z_b sqrt(pd - d^2))^2 / d^2 inverted in closed form,

        d = sqrt(pd) (sqrt(n) z_a + z_b sqrt(n + z_b^2 - z_a^2)) / (n + z_b^2)   (the root with d sqrt(n) >= z_a sqrt(pd)).

    Assumptions: independent questions; a known discordance rate pd (share of questions exactly one run gets
    right: a previous run's (b + c) / n, or 0.1); the normal approximation, which needs a few dozen expected
    discordant pairs (n pd), so small runs get an optimistic figure. The exact McNemar test is slightly less powerful.
    """
    z_a, z_b = _z_values(alpha, power)
    pd = discordance_rate
    if not 0.0 < pd <= 1.0:
        raise ValueError(f"discordance_rate must lie in (0, 1], got {pd}")
    if n <= 0:
        raise ValueError(f"n must be positive, got {n}")
    inner = n + z_b * z_b - z_a * z_a
    mde = math.inf
    if inner >= 0:
        d = math.sqrt(pd) * (math.sqrt(n) * z_a + z_b * math.sqrt(inner)) / (n + z_b * z_b)
        if d <= pd:
            mde = d
    return PairedMDE(n=n, discordance_rate=pd, alpha=alpha, power=power, mde=mde)


def rule_before(b: np.ndarray, c: np.ndarray, n: int) -> np.ndarray:
    """Status per cell under the rule before issue 12 (rows are gates)."""
    p = binom.sf(b - 1, b + c, 0.5)  # exact one-sided McNemar; 1 when b + c = 0
    p_adj = holm_rows(p, np.ones_like(p, dtype=bool))
    status = np.full(b.shape, "inconclusive", dtype=object)
    status[p_within_tolerance(b, c, n, TOL) <= ALPHA] = "pass"
    status[(p_adj <= ALPHA) & ((b - c) / n > TOL)] = "regression"
    return status


def rule_now(b: np.ndarray, c: np.ndarray, n: int) -> np.ndarray:
    return decide_drops(b, c, np.full(b.shape, n), TOL, ALPHA).status


RULES: dict[str, Rule] = {"before": rule_before, "now": rule_now}


def draw(rng: np.random.Generator, runs: int, n: int, discordance: float, drops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Flip counts (b, c), shape (runs, cells): b ~ Bin(n, q + d), c | b ~ Bin(n - b, q / (1 - q - d))."""
    q = discordance / 2
    b = rng.binomial(n, np.broadcast_to(q + drops, (runs, drops.size)))
    c = rng.binomial(n - b, q / (1 - q - drops))
    return b, c


def verdicts(status: np.ndarray) -> dict[str, float]:
    regression = (status == "regression").any(axis=1)
    passed = (status == "pass").all(axis=1)
    return {"pass": passed.mean(), "regression": regression.mean(), "inconclusive": (~regression & ~passed).mean()}


def detected_80(rng: np.random.Generator, rule: Rule, runs: int, n: int, discordance: float) -> float:
    """The drop in one cell of 13 that the rule calls a regression in 80% of runs (linear interpolation on a grid)."""
    grid = np.arange(0.0, 0.4, 0.0025)
    rate = []
    for d in grid:
        drops = np.zeros(CELLS)
        drops[0] = d
        b, c = draw(rng, runs, n, discordance, drops)
        rate.append((rule(b, c, n)[:, 0] == "regression").mean())
        if rate[-1] >= POWER:
            break
    rate = np.asarray(rate)
    return float(np.interp(POWER, rate, grid[: rate.size])) if rate[-1] >= POWER else float("inf")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000, help="Simulated gates per scenario.")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()

    print(f"Verdicts over {args.runs} simulated gates per row: {CELLS} cells, tolerance {TOL}, alpha {ALPHA}; the same drop in every cell")
    print(f"{'n':>5} {'disc':>6} {'drop':>5} | {'before: pass  regr  inc':>24} | {'now: pass  regr  inc':>22}")
    worst_null, power_5, power_20 = 0.0, 0.0, []
    for n in SIZES:
        for disc in DISCORDANCES:
            for drop in DROPS:
                b, c = draw(rng, args.runs, n, disc, np.full(CELLS, drop))
                rates = {name: verdicts(rule(b, c, n)) for name, rule in RULES.items()}
                cols = " | ".join(f"{r['pass']:>10.1%} {r['regression']:>5.1%} {r['inconclusive']:>5.1%}" for r in rates.values())
                print(f"{n:>5} {disc:>6} {drop:>5} | {cols}")
                now = rates["now"]["regression"]
                if drop <= TOL:
                    worst_null = max(worst_null, now)
                if (n, disc, drop) == (1319, 0.036, 0.05):
                    power_5 = now
                if drop == 0.20:
                    power_20.append(now)
    # Intersection-union: one cell exactly at the tolerance, the others without a drop, must pass <= alpha.
    false_pass = 0.0
    for n in SIZES:
        for disc in DISCORDANCES:
            b, c = draw(rng, args.runs, n, disc, np.r_[TOL, np.zeros(CELLS - 1)])
            false_pass = max(false_pass, verdicts(rule_now(b, c, n))["pass"])

    def rate(x: float) -> str:
        lo, hi = wilson_interval(round(x * args.runs), args.runs)
        return f"{x:.1%} (95% simulation interval {lo:.1%}-{hi:.1%})"

    print()
    print("Targets (now):")
    print(f"  family-wise regression rate with every drop <= {TOL}: worst row {rate(worst_null)}; target <= {ALPHA:.0%}")
    print(f"  pass with one cell's drop at {TOL}, the others 0: worst setting {rate(false_pass)}; target <= {ALPHA:.0%}")
    print(f"  power at a 5-point drop, n=1319, discordance 0.036: {rate(power_5)}; target >= 80%")
    print(f"  regression at a 20-point drop: {min(power_20):.1%} of runs in the worst setting; target 100%")

    print()
    print(f"MDE: the drop in one cell of {CELLS} found with {POWER:.0%} power: printed vs simulated ({args.runs} gates per grid point)")
    print(f"{'n':>5} {'disc':>6} | {'before: shown  simulated':>24} | {'now: shown  simulated  shown/sim':>32}")
    for n in SIZES:
        for disc in DISCORDANCES:
            shown_before = mde_paired(n, disc, ALPHA, POWER).mde
            shown_now = mde_beyond_tolerance(n, disc, TOL, ALPHA, POWER, CELLS)
            sim_before, sim_now = (detected_80(rng, rule, args.runs, n, disc) for rule in RULES.values())
            before, now = f"{shown_before:>14.3f} {sim_before:>9.3f}", f"{shown_now:>11.3f} {sim_now:>10.3f} {shown_now / sim_now:>10.2f}"
            print(f"{n:>5} {disc:>6} | {before} | {now}")
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
