"""The exact McNemar test: two runs compared over the same questions.

The two runs answer the same questions, so only the discordant pairs (exactly one run right)
carry information about a difference; with 1319 GSM8K questions and a few dozen flips this is
far more sensitive than a two-proportion test, which throws the pairing away.
"""

from __future__ import annotations

from typing import Literal, get_args

from scipy.stats import binom

Alternative = Literal["two-sided", "greater", "less"]


def mcnemar_p(b: int, c: int, alternative: Alternative = "two-sided") -> float:
    """The exact (conditional) McNemar p-value of `b` right->wrong and `c` wrong->right flips: under H0,
    b ~ Binomial(b + c, 1/2). Exact rather than chi-square: regressions are often judged on a handful of flips.

    `greater` (candidate worse): P(X >= b); `less`: P(X <= b); `two-sided`: min(1, 2 min(P(X <= b), P(X >= b))),
    `scipy.stats.binomtest`'s for this symmetric null. No discordant pair: p = 1.
    """
    if min(b, c) < 0 or alternative not in get_args(Alternative):
        raise ValueError(f"need counts >= 0 and an alternative of {get_args(Alternative)}, got {b}, {c}, {alternative!r}")
    n = b + c
    if n == 0:
        return 1.0
    if alternative == "greater":
        return float(binom.sf(b - 1, n, 0.5))
    if alternative == "less":
        return float(binom.cdf(b, n, 0.5))
    return min(1.0, 2.0 * float(binom.cdf(min(b, c), n, 0.5)))  # the mirror tail doubled; b == c caps at 1
