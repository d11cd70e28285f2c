"""Compare two greedy generations of the same prompt: pure functions, no server.

Positions after the first divergence are conditioned on different tokens, so the
distribution measures use only the aligned positions: those before the first
divergence and the divergence position itself (same context, different choice).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class TokenComparison:
    """How a warm generation departs from a cold one, token by token."""

    exact: bool  # identical token sequences
    first_divergence: int | None  # first position whose tokens differ (None: identical)
    aligned: int  # positions compared for the distribution measures
    top1_agreement: float | None  # share of aligned positions with the same most likely token
    js_mean: float | None  # mean Jensen-Shannon divergence (nats) of the top-k distributions
    js_max: float | None


def first_divergence(a: Sequence[Hashable], b: Sequence[Hashable]) -> int | None:
    found = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    return found if found is not None or len(a) == len(b) else min(len(a), len(b))


def _with_unlisted(top: Mapping[str, float], support: set[str]) -> dict[str, float]:
    """Probabilities over `support` plus a rest bucket.

    A token this side did not list gets an even share of its unlisted mass, but never more
    than its least likely listed token (it would have been listed otherwise).
    """
    probs = {t: math.exp(lp) for t, lp in top.items()}
    unlisted = max(0.0, 1.0 - sum(probs.values()))
    missing = support - probs.keys()
    share = min(unlisted / (len(missing) + 1), min(probs.values(), default=1.0))
    return {**probs, **dict.fromkeys(missing, share), "\0rest": unlisted - share * len(missing)}


def js_divergence(p_top: Mapping[str, float], q_top: Mapping[str, float]) -> float:
    """Jensen-Shannon divergence (nats, 0..ln 2) of two top-k logprob lists at one position."""
    support = set(p_top) | set(q_top)
    p, q = _with_unlisted(p_top, support), _with_unlisted(q_top, support)
    total = sum(0.5 * x * math.log(2 * x / (p[t] + q[t])) for t in p for x in (p[t], q[t]) if x > 0)
    return max(0.0, total)


def _argmax(top: Mapping[str, float]) -> str | None:
    return max(top, key=top.__getitem__) if top else None


def compare(
    a: Sequence[Hashable],
    b: Sequence[Hashable],
    a_top: Sequence[Mapping[str, float]] | None = None,
    b_top: Sequence[Mapping[str, float]] | None = None,
) -> TokenComparison:
    """Tokens `a` vs `b`, and where both are given, their per-position top-k logprobs."""
    div = first_divergence(a, b)
    aligned = min(len(a), len(b)) if div is None else min(div + 1, len(a), len(b))
    top1 = js_mean = js_max = None
    if a_top is not None and b_top is not None and aligned:
        pairs = list(zip(a_top[:aligned], b_top[:aligned]))
        if pairs and all(p and q for p, q in pairs):
            top1 = sum(_argmax(p) == _argmax(q) for p, q in pairs) / len(pairs)
            js = [js_divergence(p, q) for p, q in pairs]
            js_mean, js_max = sum(js) / len(js), max(js)
    return TokenComparison(div is None, div, aligned, top1, js_mean, js_max)
