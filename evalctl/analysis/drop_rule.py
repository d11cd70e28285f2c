"""The gate's accuracy rule: is a paired drop beyond the tolerance, within it, or neither?

A reference and a candidate answer the same n questions; b counts right->wrong flips, c
wrong->right ones; the drop delta = p_b - p_c (reference minus candidate accuracy) is estimated
by (b - c) / n. Each cell gets two one-sided tests at tolerance `tol`, both with the
skew-corrected score z*(tol) (`intervals.skew_corrected_score`: Tango's 1998 score with Gart &
Nam's 1988 skewness correction and a continuity correction toward not rejecting):

- beyond (regression): H0 delta <= tol vs H1 delta > tol; p = 1 - Phi(z*), b - c lowered by
  three quarters of a flip;
- within (pass): H0 delta >= tol vs H1 delta < tol; p = Phi(z*), b - c raised by half a flip
  (the matched-pairs non-inferiority test of Nam 1997 and Tango 1998, corrected the same way).

Both corrections because one-way flips (a deterministic engine) make b - c a binomial count whose
right tail is heavier than the normal's, where Holm tests the first of m cells at alpha / m; the
uncorrected rule's worst cases are in docs/statistics.md.

`drop_bounds` inverts the two tests: the lower bound is above tol exactly when the beyond-p is <=
alpha, the upper below tol exactly when the cell passes (z* decreases in delta0), so interval and
decision cannot disagree (tests/analysis/test_drop_rule.py checks every (b, c) at several n).

`decide_drops` applies the rule to a family of cells (all accuracy checks of one gate):
regression where the beyond-p, Holm-adjusted over the family (Holm 1979), is <= alpha; pass where
the cell's within-p is <= alpha (the gate passes only when every cell does: an intersection-union
test, Berger 1982, which needs no adjustment); inconclusive otherwise, and for cells with fewer
than `min_n` pairs, which stay out of the family.

Guarantees, proven by exact enumeration (`scripts/exact_gate.py`, no simulation) for alpha =
0.05, tolerance 0.03, every n from 30 to 5,000, every extra discordance 2 p_c from 0 to 0.3, 1 to
20 cells:
- family-wise false-regression rate <= alpha: whenever every cell's true drop is <= tol, the
  chance that any cell is called a regression is at most alpha, under any dependence between
  cells (the script bounds it by m0 * size(alpha / m0), the Bonferroni bound Holm's first step
  obeys, m0 the cells whose null holds);
- false acceptance <= alpha: whenever some cell's true drop is >= tol, the chance that the cell,
  hence the gate, passes is at most alpha.
The worst case over the null is at a drop of exactly tol (given c the rejection region is an upper
set in b, and b | c grows stochastically with p_b). Other tolerances and alphas are approximate
unless the script is run for them (`--tolerance`, `--alpha`).

Assumptions: questions are independent draws from the population the run stands for, each giving
one (reference, candidate) outcome pair; the `min_n` floor keeps tiny cells out. References: Tango
1998, Stat Med 17:891; Nam 1997, Biometrics 53:1422; Gart & Nam 1988, Biometrics 44:323; Laud
2017, Pharm Stat 16:334; Fagerland, Lydersen & Laake 2014, Stat Med 33:2850; Holm 1979, Scand J
Stat 6:65; Berger 1982, Technometrics 24:295.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy.special import ndtr, ndtri

from evalctl.analysis.intervals import skew_corrected_score
from evalctl.analysis.multiple import holm_rows

# Flips taken from b - c toward not rejecting: half a flip for the lattice on each side, and on
# the regression side a quarter more for what the one-term expansion leaves out (its tail is
# tested at alpha / m); 0.5 there exceeds alpha (5.2%, n = 274), 1.0 costs 3.4 points of power.
REGRESSION_CONTINUITY, PASS_CONTINUITY = 0.75, 0.5


def beyond_score(b: ArrayLike, c: ArrayLike, n: ArrayLike, delta0: ArrayLike) -> np.ndarray:
    """The regression side's z*: large when the drop is beyond delta0."""
    return np.asarray(skew_corrected_score(b, c, n, delta0, continuity=REGRESSION_CONTINUITY))


def within_score(b: ArrayLike, c: ArrayLike, n: ArrayLike, delta0: ArrayLike) -> np.ndarray:
    """The pass side's z*: very negative when the drop is within delta0."""
    return np.asarray(skew_corrected_score(b, c, n, delta0, continuity=-PASS_CONTINUITY))


def p_beyond_tolerance(b: ArrayLike, c: ArrayLike, n: ArrayLike, tolerance: ArrayLike) -> np.ndarray:
    """One-sided p-value for H0: drop <= tolerance (small: the drop is beyond it)."""
    return ndtr(-beyond_score(b, c, n, tolerance))


def p_within_tolerance(b: ArrayLike, c: ArrayLike, n: ArrayLike, tolerance: ArrayLike) -> np.ndarray:
    """One-sided p-value for H0: drop >= tolerance (small: the drop is within it)."""
    return ndtr(within_score(b, c, n, tolerance))


_EDGE = 1e-9  # the scores are fitted on the open interval (-1, 1)


def _root(score: Callable[[np.ndarray], np.ndarray], target: float, shape: tuple[int, ...]) -> np.ndarray:
    """The delta0 in [-1, 1] where a score decreasing in delta0 crosses `target`, by bisection."""
    lo, hi = np.full(shape, -1.0 + _EDGE), np.full(shape, 1.0 - _EDGE)
    above_lo, above_hi = score(lo) >= target, score(hi) >= target
    for _ in range(60):  # 2^-60 of the interval: far below a flip
        mid = (lo + hi) / 2
        up = score(mid) >= target
        lo, hi = np.where(up, mid, lo), np.where(up, hi, mid)
    return np.where(~above_lo, -1.0, np.where(above_hi, 1.0, (lo + hi) / 2))


def drop_bounds(b: ArrayLike, c: ArrayLike, n: ArrayLike, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """The (1 - 2 alpha) interval on the drop that inverts the rule's two one-sided tests (module docstring)."""
    b, c, n = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (b, c, n)))
    z = float(ndtri(1 - alpha))
    lower = _root(lambda d: beyond_score(b, c, n, d), z, b.shape)
    upper = _root(lambda d: within_score(b, c, n, d), -z, b.shape)
    return lower, upper


@dataclass(frozen=True)
class DropDecisions:
    """The rule's outcome per cell, shaped like `decide_drops`' counts; `p_adjusted` NaN outside the family
    (below `min_n` pairs); `tests` the family size (one per row for a 2-D input)."""

    status: np.ndarray
    p_beyond: np.ndarray
    p_adjusted: np.ndarray
    p_within: np.ndarray
    tests: np.ndarray


def decide(p_beyond: ArrayLike, p_within: ArrayLike, tested: ArrayLike, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Status and Holm-adjusted beyond-p per check, from its two one-sided p-values (module docstring; rows of a
    2-D input are separate families). Any pair of one-sided tolerance tests fits (throughput's are rank tests)."""
    p_beyond, p_within = np.asarray(p_beyond, dtype=float), np.asarray(p_within, dtype=float)
    tested = np.asarray(tested, dtype=bool)
    p_adjusted = holm_rows(np.atleast_2d(p_beyond), np.atleast_2d(tested)).reshape(p_beyond.shape)
    status = np.full(p_beyond.shape, "inconclusive", dtype=object)
    status[tested & (p_within <= alpha)] = "pass"
    status[tested & (p_adjusted <= alpha)] = "regression"
    return status, p_adjusted


def decide_drops(b: ArrayLike, c: ArrayLike, n: ArrayLike, tolerance: ArrayLike, alpha: float, min_n: int = 1) -> DropDecisions:
    """Pass / regression / inconclusive for each cell of a family (module docstring); a 2-D array is one family
    per row (many simulated gates). `tolerance` may differ by cell: Holm needs only the p-values."""
    b, c, n = (np.asarray(x, dtype=float) for x in (b, c, n))
    tested = n >= min_n
    safe_n = np.maximum(n, 1.0)  # untested cells may hold n = 0; their p-values are discarded
    p_beyond = np.where(tested, p_beyond_tolerance(b, c, safe_n, tolerance), np.nan)
    p_within = np.where(tested, p_within_tolerance(b, c, safe_n, tolerance), np.nan)
    status, p_adjusted = decide(p_beyond, p_within, tested, alpha)
    return DropDecisions(status, p_beyond, p_adjusted, p_within, tested.sum(axis=-1))


def with_drop_decisions(table: pd.DataFrame, tolerance: ArrayLike, alpha: float, min_n: int) -> pd.DataFrame:
    """A paired table (b, c, n per cell, one family) with the rule's columns: tolerance, status, p_beyond, p_adjusted
    (Holm), p_within, tests (the family's size), and the interval rule_lower, rule_upper (`drop_bounds`), named apart
    from its McNemar p_value."""
    decided = decide_drops(table["b"], table["c"], table["n"], tolerance, alpha, min_n)
    lower, upper = drop_bounds(table["b"], table["c"], table["n"].clip(lower=1), alpha) if len(table) else ([], [])
    return table.assign(
        tolerance=tolerance,
        status=decided.status,
        p_beyond=decided.p_beyond,
        p_adjusted=decided.p_adjusted,
        p_within=decided.p_within,
        tests=int(decided.tests),
        rule_lower=lower,
        rule_upper=upper,
    )
