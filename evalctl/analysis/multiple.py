"""Holm's multiple-comparison adjustment: at alpha = 0.05, twenty independent null comparisons
make one false "regression" on average; adjusted p-values (in input order, reject where
adjusted <= alpha) keep the error rate over the whole sweep rather than per cell."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm-Bonferroni step-down adjusted p-values: the chance of even one false rejection stays <= alpha
    under any dependence between the tests, uniformly more powerful than Bonferroni.

    With sorted p_(1) <= ... <= p_(m), adjusted_(i) = max_{j<=i} min(1, (m - j + 1) p_(j)).
    """
    p = np.asarray(p_values, dtype=float)
    if p.ndim != 1:
        raise ValueError(f"p_values must be one-dimensional, got shape {p.shape}")
    return holm_rows(p[np.newaxis, :], np.ones((1, p.size), dtype=bool))[0]


def holm_rows(p_values: np.ndarray, tested: np.ndarray) -> np.ndarray:
    """Holm-adjusted p-values for many families at once: each row of a 2-D array is one family.

    Entries where `tested` is False are not in their row's family: they do not count in its
    size m and come back NaN (their p-values may be anything, NaN included).
    """
    tested = np.asarray(tested, dtype=bool)
    p = np.where(tested, np.asarray(p_values, dtype=float), np.inf)  # untested sort last
    if p.ndim != 2 or p.shape != tested.shape:
        raise ValueError(f"p_values and tested must be 2-D of one shape, got {p.shape} and {tested.shape}")
    if ((p < 0) | ((p > 1) & tested) | np.isnan(p)).any():
        raise ValueError("tested p_values must lie in [0, 1] and contain no NaN")
    m = tested.sum(axis=1, keepdims=True)
    rank = np.arange(p.shape[1])
    order = np.argsort(p, axis=1, kind="stable")
    ranked = np.take_along_axis(p, order, axis=1)
    in_family = rank < m
    scaled = np.where(in_family, (m - rank) * np.where(in_family, ranked, 0.0), -1.0)
    adjusted = np.where(in_family, np.minimum(1.0, np.maximum.accumulate(scaled, axis=1)), np.nan)
    out = np.empty_like(adjusted)
    np.put_along_axis(out, order, adjusted, axis=1)
    return out
