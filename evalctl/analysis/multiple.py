"""Multiple-comparison adjustment of p-values.

A sweep (few-shot counts x cache settings x tasks) runs many paired tests at
once; at alpha = 0.05, twenty independent null comparisons produce one false
"regression" on average. Adjusted p-values let the gate keep its error rate
over the whole sweep rather than per cell.

Both functions return adjusted p-values in the input order, so they can be
compared directly with alpha (reject where adjusted <= alpha).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _as_pvalues(p_values: Sequence[float]) -> np.ndarray:
    p = np.asarray(p_values, dtype=float)
    if p.ndim != 1:
        raise ValueError(f"p_values must be one-dimensional, got shape {p.shape}")
    if np.isnan(p).any() or (p < 0).any() or (p > 1).any():
        raise ValueError("p_values must lie in [0, 1] and contain no NaN")
    return p


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm-Bonferroni step-down adjusted p-values (family-wise error rate).

    Use it when any single false regression verdict is costly: it controls the
    probability of even one false rejection, under any dependence between the
    tests, and is uniformly more powerful than plain Bonferroni.

    With sorted p_(1) <= ... <= p_(m), adjusted_(i) = max_{j<=i} min(1,
    (m - j + 1) p_(j)); the running maximum keeps the adjusted values in the
    same order as the raw ones.
    """
    p = _as_pvalues(p_values)
    return holm_rows(p[np.newaxis, :], np.ones((1, p.size), dtype=bool))[0]


def holm_rows(p_values: np.ndarray, tested: np.ndarray) -> np.ndarray:
    """Holm-adjusted p-values for many families at once: each row of a 2-D array is one family.

    Entries where `tested` is False are not in their row's family: they do not count in its
    size m and come back NaN (their p-values may be anything, NaN included). The gate's
    simulation adjusts thousands of simulated gates in one call this way.
    """
    tested = np.asarray(tested, dtype=bool)
    p = np.where(tested, np.asarray(p_values, dtype=float), np.inf)  # untested sort last
    if p.ndim != 2 or p.shape != tested.shape:
        raise ValueError(f"p_values and tested must be 2-D of one shape, got {p.shape} and {tested.shape}")
    if ((p < 0) | ((p > 1) & tested) | np.isnan(p)).any():
        raise ValueError("tested p_values must lie in [0, 1]")
    m = tested.sum(axis=1, keepdims=True)
    rank = np.arange(p.shape[1])
    order = np.argsort(p, axis=1, kind="stable")
    ranked = np.take_along_axis(p, order, axis=1)
    scaled = np.where(rank < m, (m - rank) * np.where(rank < m, ranked, 0.0), np.nan)
    adjusted_sorted = np.minimum(1.0, np.maximum.accumulate(np.nan_to_num(scaled, nan=-1.0), axis=1))
    adjusted_sorted = np.where(rank < m, adjusted_sorted, np.nan)
    out = np.empty_like(adjusted_sorted)
    np.put_along_axis(out, order, adjusted_sorted, axis=1)
    return out


def benjamini_hochberg(p_values: Sequence[float]) -> np.ndarray:
    """Benjamini-Hochberg step-up adjusted p-values (false discovery rate).

    Use it for exploratory sweeps where a small fraction of false flags is
    acceptable in exchange for power. FDR control is guaranteed for
    independent or positively dependent tests (PRDS), which covers cells of a
    sweep that share a model and question set.

    With sorted p_(1) <= ... <= p_(m), adjusted_(i) = min_{j>=i} min(1,
    m p_(j) / j); the running minimum from the largest p keeps the order.
    """
    p = _as_pvalues(p_values)
    m = p.size
    if m == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    scaled = p[order] * m / np.arange(1, m + 1)
    adjusted_sorted = np.minimum(1.0, np.minimum.accumulate(scaled[::-1])[::-1])
    out = np.empty(m)
    out[order] = adjusted_sorted
    return out
