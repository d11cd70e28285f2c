"""Multiple-comparison adjustment of p-values.

A sweep (few-shot counts x cache settings x tasks) runs many paired tests at
once; at alpha = 0.05, twenty independent null comparisons produce one false
"regression" on average. Adjusted p-values let the gate keep its error rate
over the whole sweep rather than per cell.

`holm` returns adjusted p-values in the input order, so they can be
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
    m = p.size
    if m == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    scaled = (m - np.arange(m)) * p[order]
    adjusted_sorted = np.minimum(1.0, np.maximum.accumulate(scaled))
    out = np.empty(m)
    out[order] = adjusted_sorted
    return out
