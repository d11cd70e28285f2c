"""The sequential gate: stop a cell's questions once its verdict is known, at no cost in validity.

Questions go out in one seeded permutation shared by every cell, so the first n are a random
sample and the cells stay paired. At planned *looks* (n_1 = `min_n` paired questions, then
`growth` times more each look, up to the planned total N; fixed in advance, never by the data)
each candidate cell is tested against its reference with the fixed-n gate's rule at `tol`:

- regression: H0 d <= tol rejected, one-sided, Holm across the cells, d = p_b - p_c the drop;
- pass: H0 d >= tol rejected in every cell (an intersection-union test, no adjustment);
- otherwise the cell goes on, and is inconclusive when its questions run out.

A decided cell sends no more questions. Both tests act on X_i = ref_i - cand_i in {-1, 0, 1}
(mean d) and keep their level whenever, for whichever reason, the cell stops at a look.

**Group-sequential part** (both sides). At look k, Z_k = z*(b_k, c_k, n_k; tol), the fixed-n
gate's skew-corrected Tango score (`drop_rule.beyond_score`, `within_score`). Under d = tol,
(Z_1, ..., Z_K) is asymptotically multivariate normal with cov(Z_j, Z_k) = sqrt(t_j / t_k),
t_k = n_k / N (Jennison & Turnbull 2000, ch. 3). The boundaries spend alpha (Lan & DeMets 1983)
by the Hwang, Shih & DeCani (1990) function

    a(t) = a (1 - exp(-gamma t)) / (1 - exp(-gamma)),    gamma != 0 (a t at gamma = 0),

solved look by look so that P(Z_1 < c_1, ..., Z_{k-1} < c_{k-1}, Z_k >= c_k) = a(t_k) - a(t_{k-1})
under H0, by recursive numerical integration of the score process (Armitage, McPherson & Rowe
1969; Jennison & Turnbull, ch. 19); the last look spends what is left. gamma = -4 (regression)
spends almost nothing early, like O'Brien-Fleming, so the last boundary stays near the fixed-n
z_a; the pass side's -2 stops healthy cells sooner. Regression rejects when Z_k >= c_k(a_R);
pass when Z_k <= -c_k(a), the mirror test of H0 d >= tol at level a.

**E-process part** (regression side only: early, the z's right tail is too light, yet a collapse
should stop within a few dozen pairs). A share `e_share` of each cell's regression level goes to
a betting e-process, exact for any law of X with mean <= tol at every question (Shafer & Vovk;
Waudby-Smith & Ramdas 2023, JRSS-B):

    E_n = (1/J) sum_j prod_{i<=n} (1 + lambda_j (X_i - tol)),  lambda_j = j / ((J + 1)(1 + tol)),

with b, c flips among n pairs prod_i = (1 + l(1 - tol))^b (1 - l(1 + tol))^c (1 - l tol)^(n - b - c).
Each product is a nonnegative supermartingale under H0 (every factor positive), so is their mean,
and Ville's inequality gives P(sup_n E_n >= 1/eps) <= eps: the cell rejects on this side when E's
running maximum reaches 1 / (e_share * a_R).

**One cell's regression test** at level a_R rejects when either part does (the e-process at
e_share * a_R, the bound at (1 - e_share) * a_R): by the union bound its error is at most a_R at
any stopping among the looks. **Across cells**, Holm: with r cells rejected, the others are
tested at a_R = alpha / (m - r) on their whole history so far (Maurer & Bretz 2013), valid as each
cell's test is monotone in its level. **Across families** (the parts of a Slurm run): family f runs
Holm at `regression_share` w_f * alpha, w_f its share of the run's cells, so the run's family-wise
rate is at most alpha (weighted Bonferroni over the parts). The pass side is per cell and needs no
split. Each side's boundaries are non-binding, so stopping only removes chances to err.

**Edges.** A look is reached only with at least `min_n` pairs (`execution.stopping` counts a
look's pairs among the questions the baseline holds); a cell whose questions end below `min_n`
is inconclusive at its last look, as in the fixed-n gate. **Drift** (`drift_flags`): at every
look the halves' drops are compared (two-sided, level 0.1); where they differ the look counts as
not reached, so the cell is decided only at its last look, as the fixed-n gate decides it.

**Guarantees.** Family-wise probability of any false regression (true drop <= tol) <= alpha;
probability that a cell whose true drop is >= tol passes <= alpha. The e-process part is exact;
the group-sequential part rests on the normal approximation of the score process, checked by
simulation (`scripts/bench_sequential.py`: both rates within Monte Carlo error of alpha, at most
the fixed-n gate's). **Assumptions**: a cell's pairs are exchangeable draws from the question
population; the permutation makes every prefix a uniform sample of the questions, not of the
time they were asked in, so an engine whose accuracy changes during the run breaks it. The drift
test catches that once both halves are seen; a decision made before cannot be protected
(docs/statistics.md; where such drift is expected, `stopping.mode: fixed`). With one look at
n = N and e_share = 0 the rule is the fixed-n gate exactly. Why both procedures:
docs/sequential-stopping.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import brentq
from scipy.special import logsumexp, ndtr, ndtri

from evalctl.analysis.drop_rule import beyond_score, within_score

# Score-scale grid of the numerical integration: spacing as a share of the narrowest increment's
# standard deviation, and how far below zero the continuation density is carried (in sd units).
_GRID_STEP = 1 / 12
_GRID_LOW = 9.0
BETS = np.arange(1, 9) / 9


class CellStatus(IntEnum):
    """Where a cell stands; the gate's own names for the three decided states."""

    RUNNING = 0
    PASS = 1
    REGRESSION = 2
    INCONCLUSIVE = 3


@dataclass(frozen=True)
class Design:
    """How one sequential comparison is run and judged."""

    n_max: int
    tolerance: float
    alpha: float = 0.05
    min_n: int = 30
    growth: float = 1.15
    pass_gamma: float = -2.0
    regression_gamma: float = -4.0
    e_share: float = 0.1
    drift_alpha: float = 0.1
    regression_share: float = 1.0  # of alpha, for this family's regressions (see "Across families")

    def __post_init__(self) -> None:
        if self.n_max < 1 or self.min_n < 1 or not self.growth > 1:
            raise ValueError(f"need n_max, min_n >= 1 and growth > 1, got {self.n_max}, {self.min_n}, {self.growth}")
        if not 0 <= self.tolerance < 1 or not 0 < self.alpha < 1 or not 0 <= self.e_share < 1:
            raise ValueError("need 0 <= tolerance < 1, 0 < alpha < 1 and 0 <= e_share < 1")

    @property
    def look_sizes(self) -> np.ndarray:
        """Paired questions at each look: `min_n`, then `growth` times more each look, ending at N.

        Geometric spacing looks often while a collapse may show and seldom later, where every
        extra look would raise the final boundaries. A look just short of N merges into N.
        """
        first = min(self.min_n, self.n_max)
        count = int(np.floor(np.log(self.n_max / first) / np.log(self.growth) - 0.5))
        sizes = np.ceil(first * self.growth ** np.arange(max(count, 0) + 1)).astype(int)
        return np.unique(np.append(sizes[sizes < self.n_max], self.n_max))

    @property
    def fractions(self) -> tuple[float, ...]:
        return tuple(float(x) for x in self.look_sizes / self.n_max)


@dataclass(frozen=True)
class Decisions:
    """Per cell (arrays shaped like the counts without the looks axis), what `decide` found."""

    status: np.ndarray  # CellStatus
    look: np.ndarray  # the look a cell was decided at (-1 while running)
    by_e_process: np.ndarray  # a regression shown by the e-process rather than the group-sequential bound
    drift: np.ndarray  # the drop seen changing along the send order by then (`drift_flags`)


def spending(t: ArrayLike, alpha: float, gamma: float) -> np.ndarray:
    """Hwang-Shih-DeCani alpha spent by information fraction t (0 at t = 0, alpha at t = 1)."""
    t = np.asarray(t, dtype=float)
    if gamma == 0:
        return alpha * t
    return alpha * np.expm1(-gamma * t) / np.expm1(-gamma)


def _excess_crossing(score: float, grid: np.ndarray, mass: np.ndarray, sd: float, share: float) -> float:
    """P(not crossed before, crossing `score` now) minus the share to spend, for the root finder."""
    return float(mass @ ndtr((grid - score) / sd)) - share


@lru_cache(maxsize=256)
def upper_bounds(fractions: tuple[float, ...], alpha: float, gamma: float) -> np.ndarray:
    """One-sided group-sequential z boundaries c_k at the looks, the last spending all of alpha.

    Under H0 the z path crosses some c_k with probability alpha, the share a(t_k) - a(t_{k-1})
    at look k. A look whose share is nil gets c_k = inf.
    """
    t = np.asarray(fractions, dtype=float)
    if t.ndim != 1 or not t.size or (np.diff(t) <= 0).any() or t[0] <= 0 or t[-1] > 1:
        raise ValueError(f"fractions must increase within (0, 1], got {fractions}")
    spent = spending(t, alpha, gamma)
    spent[-1] = alpha
    shares = np.diff(spent, prepend=0.0)
    sds = np.sqrt(np.diff(t, prepend=0.0))
    bounds = np.full(t.size, np.inf)
    # Sub-density of the score S_k = Z_k sqrt(t_k) that has not crossed yet, on a grid fine
    # against both the increment that made it and the one that follows.
    grid, mass = np.zeros(1), np.ones(1)
    for k in range(t.size):
        top = (_GRID_LOW + 1) * np.sqrt(t[k])
        args = (grid, mass, sds[k], shares[k])
        if shares[k] > 0 and _excess_crossing(top, *args) < 0:
            top = brentq(_excess_crossing, -top, top, args=args, xtol=1e-10)
            bounds[k] = top / np.sqrt(t[k])
        if k == t.size - 1:
            break
        low = -_GRID_LOW * np.sqrt(t[k])
        step = _GRID_STEP * min(sds[k], sds[k + 1])
        new_grid = np.linspace(low, top, max(3, int(np.ceil((top - low) / step)) + 1))
        density = np.exp(-0.5 * ((new_grid[:, None] - grid[None, :]) / sds[k]) ** 2) @ mass / (sds[k] * np.sqrt(2 * np.pi))
        weights = np.full(new_grid.size, new_grid[1] - new_grid[0])
        weights[[0, -1]] /= 2  # trapezoid rule
        grid, mass = new_grid, weights * density
    return bounds


def regression_log_e(b: ArrayLike, c: ArrayLike, n: ArrayLike, tolerance: float) -> np.ndarray:
    """log E_n of the betting e-process against H0 drop <= tolerance, from flip counts (NaN stays NaN)."""
    b, c, n = (np.asarray(x, dtype=float)[..., None] for x in (b, c, n))
    bets = BETS / (1 + tolerance)
    wealth = b * np.log1p(bets * (1 - tolerance)) + c * np.log1p(-bets * (1 + tolerance)) + (n - b - c) * np.log1p(-bets * tolerance)
    return logsumexp(wealth, axis=-1) - np.log(BETS.size)


def drift_flags(b: np.ndarray, c: np.ndarray, n: np.ndarray, design: Design) -> np.ndarray:
    """Per look, whether the drop has been seen to change along the send order by then.

    At look k the pairs are split at the last earlier look with at most half of them: an
    early part and a late one. Under exchangeability both estimate the same drop, and
    z = (d_early - d_late) / sqrt(v (1/n_early + 1/n_late)), v = D - d^2 pooled over the look,
    is about standard normal; |z| >= z_{drift_alpha/2} flags drift at that look. A flag holds
    the cell's decision back to a later look (it costs requests, never validity), so the level
    is liberal (0.1); it is not carried forward, so a chance flag delays only while the early
    and late parts still look apart.
    """
    sizes = design.look_sizes[: b.shape[-1]]
    flags = np.zeros(b.shape, dtype=bool)
    z_crit = float(ndtri(1 - design.drift_alpha / 2))
    for k in range(1, sizes.size):
        j = int(np.searchsorted(sizes, sizes[k] / 2, side="right")) - 1
        if j < 0 or j >= k:
            continue
        n_e, n_l = n[..., j], n[..., k] - n[..., j]
        d_e, d_l = (b[..., j] - c[..., j]) / n_e, (b[..., k] - b[..., j] - c[..., k] + c[..., j]) / n_l
        d, disc = (b[..., k] - c[..., k]) / n[..., k], (b[..., k] + c[..., k]) / n[..., k]
        with np.errstate(divide="ignore", invalid="ignore"):
            z = (d_e - d_l) / np.sqrt(np.maximum(disc - d * d, 0.0) * (1 / n_e + 1 / n_l))
        flags[..., k] = np.nan_to_num(np.abs(z), nan=0.0, posinf=np.inf) >= z_crit
    return flags


def _first(hit: np.ndarray) -> np.ndarray:
    """Index of the first True along the last axis, or its length when there is none."""
    return np.where(hit.any(axis=-1), hit.argmax(axis=-1), hit.shape[-1])


def decide(b: ArrayLike, c: ArrayLike, n: ArrayLike, design: Design) -> Decisions:
    """Each cell's status after the looks seen so far.

    `b`, `c`, `n` hold cumulative right->wrong flips, wrong->right flips and paired questions
    at each look of `design`, shape (..., cells, looks seen); NaN marks a look a cell has not
    reached. Cells along the second-last axis form one Holm family (one run); leading axes are
    independent runs. A cell that reached the last look undecided is inconclusive.
    """
    b, c, n = (np.asarray(x, dtype=float) for x in (b, c, n))
    if not b.shape == c.shape == n.shape or b.ndim < 2:
        raise ValueError(f"b, c, n must share a shape (..., cells, looks), got {b.shape}, {c.shape}, {n.shape}")
    cells, seen = b.shape[-2:]
    fractions = design.fractions
    if seen > len(fractions):
        raise ValueError(f"{seen} looks given, the design has {len(fractions)}")
    # A look with fewer than min_n pairs is not reached: never passed or failed on, as in the fixed-n gate.
    reached_last = ~np.isnan(n[..., -1])
    small = n < design.min_n
    b, c, n = (np.where(small, np.nan, x) for x in (b, c, n))
    # Nor is a look flagged for drift: the cell is decided at its last, on the whole population's drop.
    drift = drift_flags(b, c, n, design)
    early_drift = drift & (np.arange(seen) < len(fractions) - 1)
    b, c, n = (np.where(early_drift, np.nan, x) for x in (b, c, n))
    z = within_score(b, c, n, design.tolerance)
    first_pass = _first(z <= -upper_bounds(fractions, design.alpha, design.pass_gamma)[:seen])
    z = beyond_score(b, c, n, design.tolerance)
    log_e = np.fmax.accumulate(regression_log_e(b, c, n, design.tolerance), axis=-1) if design.e_share else None
    # The first look each cell's regression test rejects at, by the bound and by the e-process, at every Holm level a/(m - r).
    first_bound, first_e = [], []
    for level in design.alpha * design.regression_share / (cells - np.arange(cells)):
        bound = upper_bounds(fractions, (1 - design.e_share) * level, design.regression_gamma)[:seen]
        first_bound.append(_first(np.maximum.accumulate(np.nan_to_num(z - bound, nan=-np.inf), axis=-1) >= 0))
        first_e.append(_first(log_e >= -np.log(design.e_share * level)) if log_e is not None else np.full(z.shape[:-1], seen))
    first_bound, first_e = np.stack(first_bound, axis=-1), np.stack(first_e, axis=-1)
    status = np.full(b.shape[:-1], CellStatus.RUNNING, dtype=np.int8)
    look = np.full(b.shape[:-1], -1)
    by_e = np.zeros(b.shape[:-1], dtype=bool)
    for k in range(seen):
        while True:  # Holm: each rejection raises the level of the cells still running
            rejected = np.minimum((status == CellStatus.REGRESSION).sum(axis=-1, keepdims=True), cells - 1)
            index = np.broadcast_to(rejected[..., None], (*status.shape, 1))
            e_hit = np.take_along_axis(first_e, index, axis=-1)[..., 0] <= k
            new = (status == CellStatus.RUNNING) & (e_hit | (np.take_along_axis(first_bound, index, axis=-1)[..., 0] <= k))
            if not new.any():
                break
            status[new], look[new], by_e[new] = CellStatus.REGRESSION, k, e_hit[new]
        new = (status == CellStatus.RUNNING) & (first_pass == k)
        status[new], look[new] = CellStatus.PASS, k
    if seen == len(fractions):
        out = (status == CellStatus.RUNNING) & reached_last
        status[out], look[out] = CellStatus.INCONCLUSIVE, seen - 1
    at = np.where(look >= 0, look, seen - 1)[..., None]
    return Decisions(status, look, by_e, np.take_along_axis(drift, at, axis=-1)[..., 0])
