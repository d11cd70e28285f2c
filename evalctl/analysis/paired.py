"""The exact McNemar test: two runs compared over the same questions.

Two runs of the same benchmark (reference server vs candidate server, cache
off vs cache on) answer the *same* questions, so their per-question outcomes
are paired. Comparing the two accuracies as if they were independent samples
throws that pairing away: most questions are answered identically by both
runs and carry no information about a difference. Only the discordant pairs
(questions where exactly one run is right) do, which is what McNemar's test
uses. With 1319 GSM8K questions and a few dozen flips this is far more
sensitive than a two-proportion test.
"""

from __future__ import annotations

from typing import Literal, get_args

from scipy.stats import binom

Alternative = Literal["two-sided", "greater", "less"]


def mcnemar_p(b: int, c: int, alternative: Alternative = "two-sided") -> float:
    """The exact (conditional) McNemar p-value of `b` right->wrong and `c` wrong->right flips.

    Conditional on n = b + c discordant pairs, H0 (both runs equally accurate) makes each flip
    equally likely to go either way, so b ~ Binomial(n, 1/2). The exact binomial tail is used
    rather than the chi-square approximation because regressions are often judged on a handful
    of flips, where the approximation is poor.

    `greater`: the candidate is worse, p = P(X >= b) (the one-sided test for a regression);
    `less`: the candidate is better, p = P(X <= b); `two-sided`: min(1, 2 min(P(X <= b), P(X >= b))),
    which for this symmetric null equals `scipy.stats.binomtest`'s. With no discordant pair, p = 1.
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
