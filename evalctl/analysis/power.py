"""How large a regression a run can detect (the minimum detectable effect, MDE): a paired test that
finds nothing reassures only if the run was large enough to find a drop that matters.

One-sided throughout (the gate looks for drops); effects are accuracy drops as fractions (0.02 = 2 points).
"""

from __future__ import annotations

import math

from scipy.optimize import brentq
from scipy.stats import norm

from evalctl.analysis.drop_rule import REGRESSION_CONTINUITY
from evalctl.analysis.intervals import constrained_flip_rate


def _z_values(alpha: float, power: float) -> tuple[float, float]:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    if not 0.5 <= power < 1.0:  # below 0.5 a design is powered to miss its effect; the closed forms need z_beta >= 0
        raise ValueError(f"power must lie in [0.5, 1), got {power}")
    return float(norm.ppf(1.0 - alpha)), float(norm.ppf(power))


def mde_beyond_tolerance(
    n: int, noise_discordance: float, tolerance: float, alpha: float = 0.05, power: float = 0.8, tests: int = 1
) -> float:
    """Smallest true drop the gate's regression rule (`drop_rule`) flags with the given power, at Holm's first
    step (level alpha / tests: one regressing cell among `tests` accuracy checks).

    Model: questions flip each way at random with probability noise_discordance / 2 (= q), and a true drop d adds
    to right->wrong: p_b = q + d, p_c = q, so the discordance grows with d (`bench_gate.mde_paired` holds it fixed and has no
    answer above it). Power is the normal approximation of the continuity-corrected score statistic,
    Phi((sqrt(n) (d - tol) - c / sqrt(n) - z sqrt(V0)) / sqrt(V1)), c the rule's continuity correction, V0 the
    null variance at the constrained MLE, V1 = p_b + p_c - d^2, solved for d. `scripts/bench_gate.py` compares it
    with the simulated rule.
    """
    if not 0.0 <= noise_discordance < 1.0:
        raise ValueError(f"noise_discordance must lie in [0, 1), got {noise_discordance}")
    if n <= 0 or tests < 1:
        raise ValueError(f"n and tests must be positive, got n={n}, tests={tests}")
    z_a, z_b = _z_values(alpha / tests, power)
    q = noise_discordance / 2

    def gap(d: float) -> float:
        p_c0 = float(constrained_flip_rate(q + d, q, 1.0, tolerance))  # the null fit's limit
        v0 = 2 * p_c0 + tolerance * (1 - tolerance)
        v1 = 2 * q + d - d * d
        return math.sqrt(n) * (d - tolerance) - REGRESSION_CONTINUITY / math.sqrt(n) - z_a * math.sqrt(v0) - z_b * math.sqrt(v1)

    top = 1.0 - 2 * q  # every right answer flips
    if gap(top) < 0:
        return math.inf
    return float(brentq(gap, tolerance, top, xtol=1e-9))
