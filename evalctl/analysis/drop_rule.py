"""The gate's accuracy rule: is a paired drop beyond the tolerance, within it, or neither?

A reference and a candidate answer the same n questions; b counts right->wrong flips and c
wrong->right ones. The drop is delta = p_b - p_c (reference minus candidate accuracy),
estimated by (b - c) / n. With a tolerance `tol` two one-sided tests are run on each cell,
both with Tango's (1998) score statistic Z(tol) (`intervals.tango_score_statistic`), whose
variance comes from the cell probabilities fitted under the null (constrained MLE):

- beyond (regression): H0: delta <= tol against H1: delta > tol; p = 1 - Phi(Z(tol)), with
  a half-unit continuity correction on b - c. The flips are a skewed count whose upper tail
  the normal approximation underestimates, and Holm tests the first cell at alpha / m, far
  in that tail: uncorrected, the test's size there was 1.4 times nominal (n = 200,
  discordance 0.036, 13 cells); corrected, at most nominal in every setting simulated;
- within (pass): H0: delta >= tol against H1: delta < tol; p = Phi(Z(tol)). This is the
  matched-pairs non-inferiority test of Nam (1997) and Tango (1998).

Z(delta0) decreases in delta0, so testing at the boundary tol gives a test of the whole
composite null: the p-values are the same as inverting the one-sided Tango confidence
bounds (`paired_drop_lower_bound`, `paired_drop_upper_bound`) at tol.

`decide_drops` applies the rule to a family of cells (all accuracy checks of one gate):

- regression: the beyond-p, Holm-adjusted over the family (Holm 1979), is <= alpha;
- pass: the within-p is <= alpha in the cell (reported per cell; the gate passes only when
  every cell passes, an intersection-union test, Berger 1982, which needs no adjustment);
- inconclusive otherwise, and for cells with fewer than `min_n` pairs, which stay out of
  the family.

Guarantees, under the assumptions below:
- family-wise false-regression rate <= alpha: whenever every cell's true drop is <= tol,
  the chance that any cell of the gate is called a regression is at most alpha, under any
  dependence between cells (they share questions and servers);
- false acceptance <= alpha: whenever some cell's true drop is >= tol, the chance that the
  gate passes (every cell rejects its within-null) is at most alpha.

Assumptions: questions are independent draws from the population the run stands for, each
giving one (reference, candidate) outcome pair; and the normal approximation of the score
statistic, which is asymptotic: Tango's test holds its level closely for a few dozen pairs
and more (Fagerland, Lydersen & Laake 2014, Stat Med 33:2850; Tango 1998, Stat Med 17:891;
Nam 1997, Biometrics 53:1422). The gate's `min_n` floor keeps tiny cells out. The
simulation in scripts/bench_gate.py measures both rates.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import ndtr

from evalctl.analysis.intervals import tango_score_statistic
from evalctl.analysis.multiple import holm_rows

CONTINUITY = 0.5  # subtracted from b - c in the regression test; see the module docstring


class DropStatus(str, Enum):
    passed = "pass"
    regression = "regression"
    inconclusive = "inconclusive"


def p_beyond_tolerance(b: ArrayLike, c: ArrayLike, n: ArrayLike, tolerance: float) -> np.ndarray:
    """One-sided p-value for H0: drop <= tolerance (small: the drop is beyond it), continuity-corrected."""
    return ndtr(-np.asarray(tango_score_statistic(b, c, n, tolerance, continuity=CONTINUITY)))


def p_within_tolerance(b: ArrayLike, c: ArrayLike, n: ArrayLike, tolerance: float) -> np.ndarray:
    """One-sided p-value for H0: drop >= tolerance (small: the drop is within it)."""
    return ndtr(np.asarray(tango_score_statistic(b, c, n, tolerance)))


@dataclass(frozen=True)
class DropDecisions:
    """The rule's outcome per cell, arrays shaped like the counts given to `decide_drops`.

    `p_adjusted` is NaN for cells outside the family (fewer than `min_n` pairs); `tests` is
    the family size (one per row for a 2-D input).
    """

    status: np.ndarray
    p_beyond: np.ndarray
    p_adjusted: np.ndarray
    p_within: np.ndarray
    tests: np.ndarray


def decide(p_beyond: ArrayLike, p_within: ArrayLike, tested: ArrayLike, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Status and Holm-adjusted beyond-p per check, from the two one-sided p-values of each.

    Regression where the beyond-p, Holm-adjusted over the tested checks of a row, is <= alpha;
    pass where the within-p is <= alpha; inconclusive otherwise and where not tested. Rows of
    a 2-D input are separate families. Any pair of one-sided tolerance tests fits (the gate's
    throughput checks use rank tests).
    """
    p_beyond, p_within = np.asarray(p_beyond, dtype=float), np.asarray(p_within, dtype=float)
    tested = np.asarray(tested, dtype=bool)
    p_adjusted = holm_rows(np.atleast_2d(p_beyond), np.atleast_2d(tested)).reshape(p_beyond.shape)
    status = np.full(p_beyond.shape, DropStatus.inconclusive.value, dtype=object)
    status[tested & (p_within <= alpha)] = DropStatus.passed.value
    status[tested & (p_adjusted <= alpha)] = DropStatus.regression.value
    return status, p_adjusted


def decide_drops(b: ArrayLike, c: ArrayLike, n: ArrayLike, tolerance: float, alpha: float, min_n: int = 1) -> DropDecisions:
    """Pass / regression / inconclusive for each cell of a family (see the module docstring).

    1-D counts are one family; a 2-D array is one family per row (many simulated gates).
    """
    b, c, n = (np.asarray(x, dtype=float) for x in (b, c, n))
    tested = n >= min_n
    safe_n = np.maximum(n, 1.0)  # untested cells may hold n = 0; their p-values are discarded
    p_beyond = np.where(tested, p_beyond_tolerance(b, c, safe_n, tolerance), np.nan)
    p_within = np.where(tested, p_within_tolerance(b, c, safe_n, tolerance), np.nan)
    status, p_adjusted = decide(p_beyond, p_within, tested, alpha)
    return DropDecisions(status, p_beyond, p_adjusted, p_within, tested.sum(axis=-1))
