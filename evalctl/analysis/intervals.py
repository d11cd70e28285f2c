"""Confidence intervals: a single proportion, and a paired accuracy drop."""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

# The standard normal from the standard library: importing scipy.stats costs about a second,
# which `evalctl runs list`/`history` (Wilson bounds only) should not pay.
_NORMAL = NormalDist()


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval; well-behaved at 0 and n, unlike the Wald interval."""
    if n <= 0:
        return (math.nan, math.nan)
    z = _NORMAL.inv_cdf(0.5 + confidence / 2)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def share_bounds(prefix: str, hits: int, n: int) -> dict[str, float]:
    """`<prefix>_acc`, `_lo`, `_hi`: the share hits / n (NaN for none) and its 95% Wilson bounds."""
    lo, hi = wilson_interval(hits, n)
    return {f"{prefix}_acc": hits / n if n else math.nan, f"{prefix}_lo": lo, f"{prefix}_hi": hi}


def _counts(b: ArrayLike, c: ArrayLike, n_pairs: ArrayLike, delta0: ArrayLike) -> tuple[np.ndarray, ...]:
    b, c, n, d = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (b, c, n_pairs, delta0)))
    if (n <= 0).any() or (b < 0).any() or (c < 0).any() or (b + c > n).any():
        raise ValueError(f"need 0 <= b, c and b + c <= n_pairs > 0; got b={b}, c={c}, n={n}")
    if (d < -1).any() or (d > 1).any():
        raise ValueError(f"delta0 must lie in [-1, 1], got {d}")
    return b, c, n, d


def constrained_flip_rate(b: ArrayLike, c: ArrayLike, n_pairs: ArrayLike, delta0: ArrayLike) -> np.ndarray:
    """Maximum-likelihood wrong->right flip probability p_c under H0: p_b - p_c = delta0.

    The non-negative root of 2n x^2 + B x + C = 0 (Tango 1998). Array inputs broadcast.
    """
    b, c, n, d = _counts(b, c, n_pairs, delta0)
    a = 2.0 * n
    bq = -b - c + (2.0 * n - b + c) * d
    cq = -c * d * (1.0 - d)
    disc = np.sqrt(np.maximum(0.0, bq * bq - 4.0 * a * cq))
    # Two algebraically equal forms; take the one without cancellation.
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(bq <= 0, (disc - bq) / (2.0 * a), -2.0 * cq / (bq + disc))


def skew_corrected_score(
    b: ArrayLike, c: ArrayLike, n_pairs: ArrayLike, delta0: ArrayLike, continuity: float = 0.0, skew: bool = True
) -> Any:
    """Tango's score statistic with a Cornish-Fisher correction for the skew of b - c (`skew=False`: Tango's own).

    S = b - c sums n outcomes X in {-1, 0, 1}; under H0 drop = delta0, fitted as Tango does (constrained MLE,
    `constrained_flip_rate`), each has variance v = D - delta0^2 and third cumulant k3 = delta0 (1 - 3 D +
    2 delta0^2), D = p_b + p_c. The one-term Cornish-Fisher expansion puts S's z-quantile at n delta0 +
    sqrt(n v) z + g (z^2 - 1) / 6, g = k3 / v, so the test rejects at z when b - c - n delta0 - continuity
    exceeds sqrt(n v) z + g (z^2 - 1) / 6. z* solves that equality (the root on the branch that meets Tango's
    z as g -> 0), so comparing z* with any critical value (a fixed-n z_alpha, a group-sequential boundary)
    applies the corrected test at that level: Gart & Nam's (1988, Biometrics 44:323) skewness correction for
    score tests of proportions, in Laud's (2017, Pharm Stat 16:334) form.

    Why (`drop_rule`): without it a one-way flip count's upper tail is too light (g near 1; size up to 1.9 times
    nominal at alpha / 20); it vanishes as D grows (g is 0.25 at D = 0.09). Where the expansion has no real
    root (a numerator far out on the side the parabola bends away from, beyond any critical value used) z*
    goes on linearly from the vertex, so it stays monotone in b - c. Where the null variance vanishes (delta0
    = +-1, or no flips at delta0 = 0) z* is +-inf by the numerator's sign, 0 when that vanishes too. Scalars
    give a float; arrays broadcast.
    """
    b, c, n, d = _counts(b, c, n_pairs, delta0)
    p_c = constrained_flip_rate(b, c, n, d)
    v = np.maximum(2.0 * p_c + d * (1.0 - d), 0.0)  # = D - delta0^2, Tango's variance per pair
    with np.errstate(divide="ignore", invalid="ignore"):
        g = np.where((v > 0.0) & skew, d * (1.0 - 3.0 * (2.0 * p_c + d) + 2.0 * d * d) / np.where(v > 0.0, v, 1.0), 0.0)
    sigma = np.sqrt(n * v)
    numerator = b - c - n * d - continuity
    # g z^2 / 6 + sigma z - (numerator + g / 6) = 0, solved in the form without cancellation.
    shifted = numerator + g / 6.0
    root = np.sqrt(np.maximum(sigma * sigma + (2.0 * g / 3.0) * shifted, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(sigma > 0.0, 2.0 * shifted / (sigma + root), np.sign(numerator) * np.inf)
    z = np.where((sigma <= 0.0) & (numerator == 0), 0.0, z)
    return float(z) if z.ndim == 0 else z
