"""Paired comparison of two runs over the same questions.

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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.stats import binom

Alternative = Literal["two-sided", "greater", "less"]
_ALTERNATIVES = ("two-sided", "greater", "less")


@dataclass(frozen=True)
class McNemarResult:
    """Outcome of an exact McNemar test.

    ``b`` counts right->wrong flips (reference right, candidate wrong) and
    ``c`` wrong->right flips. ``accuracy_delta`` is candidate minus reference
    accuracy, ``(c - b) / n_pairs``; it is ``None`` when ``n_pairs`` was not
    given, because the discordant counts alone do not fix the denominator.
    """

    b: int
    c: int
    n_discordant: int
    p_value: float
    alternative: Alternative
    n_pairs: int | None = None
    accuracy_delta: float | None = None


def _check_count(name: str, value: int) -> int:
    if isinstance(value, bool) or int(value) != value or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def mcnemar_exact(
    b: int,
    c: int,
    alternative: Alternative = "two-sided",
    n_pairs: int | None = None,
) -> McNemarResult:
    """Exact (conditional) McNemar test on the discordant counts.

    Conditional on ``n = b + c`` discordant pairs, H0 (both runs equally
    accurate) makes each flip equally likely to go either way, so
    ``b ~ Binomial(n, 1/2)``. The exact binomial tail is used rather than the
    chi-square approximation because regressions are often judged on a
    handful of flips, where the approximation is poor.

    ``alternative``:
      * ``"greater"``: candidate is worse (more right->wrong than wrong->right
        flips); p = P(X >= b). This is the one-sided test for a regression.
      * ``"less"``: candidate is better; p = P(X <= b).
      * ``"two-sided"``: p = min(1, 2 * min(P(X <= b), P(X >= b))). Because the
        null distribution is symmetric, this equals the "sum of outcomes no
        more likely than the observed one" definition used by
        ``scipy.stats.binomtest``.

    With no discordant pairs there is no evidence either way and p = 1.
    """
    b = _check_count("b", b)
    c = _check_count("c", c)
    if alternative not in _ALTERNATIVES:
        raise ValueError(f"alternative must be one of {_ALTERNATIVES}, got {alternative!r}")
    n = b + c
    delta = None
    if n_pairs is not None:
        n_pairs = _check_count("n_pairs", n_pairs)
        if n_pairs < n:
            raise ValueError(f"n_pairs={n_pairs} is smaller than b + c = {n}")
        delta = (c - b) / n_pairs if n_pairs > 0 else float("nan")

    if n == 0:
        p = 1.0
    elif alternative == "greater":
        p = float(binom.sf(b - 1, n, 0.5))
    elif alternative == "less":
        p = float(binom.cdf(b, n, 0.5))
    else:
        # Symmetric null: the smaller tail is at min(b, c); doubling it counts
        # the mirror-image tail. When b == c this exceeds 1 and is capped.
        p = min(1.0, 2.0 * float(binom.cdf(min(b, c), n, 0.5)))
    return McNemarResult(
        b=b,
        c=c,
        n_discordant=n,
        p_value=min(1.0, max(0.0, p)),
        alternative=alternative,
        n_pairs=n_pairs,
        accuracy_delta=delta,
    )


def _as_outcomes(name: str, values: Sequence[bool]) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.dtype != np.bool_:
        # Accept 0/1 ints or floats, but refuse anything else: a score of 0.5
        # or a NaN silently cast to True would corrupt the flip counts.
        if arr.size and not np.isin(arr, (0, 1)).all():
            raise ValueError(f"{name} must hold booleans or 0/1 values")
        arr = arr.astype(bool)
    return arr


def paired_flips(reference: Sequence[bool], candidate: Sequence[bool]) -> tuple[int, int, int, int]:
    """Count the 2x2 paired table ``(both_right, b, c, both_wrong)``.

    ``b`` = reference right and candidate wrong (a flip to wrong), ``c`` =
    reference wrong and candidate right. The inputs must already be aligned
    question-by-question; this function cannot check that, only that the
    lengths match.
    """
    ref = _as_outcomes("reference", reference)
    cand = _as_outcomes("candidate", candidate)
    if ref.shape != cand.shape:
        raise ValueError(f"length mismatch: reference {ref.size}, candidate {cand.size}")
    both_right = int(np.count_nonzero(ref & cand))
    b = int(np.count_nonzero(ref & ~cand))
    c = int(np.count_nonzero(~ref & cand))
    both_wrong = int(np.count_nonzero(~ref & ~cand))
    return both_right, b, c, both_wrong
