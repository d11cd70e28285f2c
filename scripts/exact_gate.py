"""Exact error rates of the gate's accuracy rule, worst case over the range it promises.

    PYTHONPATH=. python scripts/exact_gate.py [--max-n 5000] [--alpha 0.05] [--tolerance 0.03]

No simulation: for every n from `--min-n` to `--max-n`, each rule's rejection region is
found exactly (for each count c of wrong->right flips, the fewest right->wrong flips b that
reject; the scores rise with b, so that is the whole region), and its probability summed
over the trinomial law of (b, c), P = sum_c P(C = c) P(B >= b*(c) | C = c), with
C ~ Bin(n, p_c) and B | C ~ Bin(n - C, p_b / (1 - p_c)).

How the enumeration covers the range:
- the drop: only a true drop of exactly the tolerance is computed. Given c the region is an
  upper set in b (lower set for a pass) and B | C grows stochastically with p_b, so for a
  fixed p_c every smaller drop rejects less often (every larger one passes less often);
- the discordance besides the drop, 2 p_c from 0 to `--max-discordance`: a grid of
  `--grid` points, denser near 0 where the flips go one way, then the worst grid points are
  refined by a bounded scalar search between their grid neighbours;
- the family: cells m = 1..`--cells`; Holm's false-regression rate with m0 true nulls under
  any dependence is at most m0 * size(alpha / m0) (its first step is Bonferroni's), the
  figure reported and checked; the rate with m independent cells, 1 - (1 - size)^m, is
  shown beside it (the audit's figures);
- false pass: one cell at the tolerance passes with probability size_pass(alpha), and a
  gate passes only if that cell does.
- n: every n up to `--every-n-to` (1,500) at every grid discordance. Beyond it, at every n
  the discordances where C expects at most 5 flips (the flips go nearly one way, and the
  size jumps from one n to the next with the lattice of b); the others, where the spread of
  C fills that lattice and the size moves smoothly with n, at every 10th n. That keeps the
  run to minutes (it takes hours at every n and discordance). Exits 1 when the current rule's worst case exceeds alpha on either
side; the rule before this one (Tango's z, half a flip off on the regression side only) is
printed beside it. Also prints the exact power for one cell of 13 at a 5-point drop.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import ndtri
from scipy.stats import binom

from evalctl.analysis.drop_rule import beyond_score, within_score
from evalctl.analysis.intervals import skew_corrected_score

Score = Callable[[np.ndarray, np.ndarray, float, float], np.ndarray]
RULES: dict[str, tuple[Score, Score]] = {
    "before": (
        lambda b, c, n, d: np.asarray(skew_corrected_score(b, c, n, d, continuity=0.5, skew=False)),
        lambda b, c, n, d: np.asarray(skew_corrected_score(b, c, n, d, skew=False)),
    ),
    "now": (beyond_score, within_score),
}
TAIL = 7.0  # standard deviations of C kept on each side: the mass left out is below 1e-11
LATTICE, STRIDE = 5.0, 10  # see Scan.run


def regression_thresholds(score: Score, n: int, c: np.ndarray, z: np.ndarray, tol: float) -> np.ndarray:
    """Fewest b that reject with c wrong->right flips, per level (rows) and c (columns); n - c + 1 when none does."""
    c = np.broadcast_to(c[None, :].astype(float), (z.size, c.size))
    lo, hi = np.zeros(c.shape), n - c + 1
    target = np.broadcast_to(z[:, None], c.shape)
    while (hi > lo).any():
        mid = np.floor((lo + hi) / 2)
        ok = (mid <= n - c) & (score(np.minimum(mid, n - c), c, n, tol) >= target)
        hi, lo = np.where(ok, mid, hi), np.where(ok, lo, mid + 1)
    return lo


def pass_thresholds(score: Score, n: int, c: np.ndarray, z: float, tol: float) -> np.ndarray:
    """Most b that still pass with c wrong->right flips; -1 when none does."""
    c = c.astype(float)
    lo, hi = np.full(c.shape, -1.0), n - c  # answer in [lo, hi]
    while (hi > lo).any():
        mid = np.ceil((lo + hi) / 2)
        ok = score(np.maximum(mid, 0), c, n, tol) <= -z
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid - 1)
    return lo


def window(n: int, p_c: float) -> slice:
    if p_c == 0:
        return slice(0, 1)
    sd = np.sqrt(n * p_c * (1 - p_c))
    return slice(max(0, int(n * p_c - TAIL * sd)), min(n, int(np.ceil(n * p_c + TAIL * sd))) + 1)


def reject_prob(n: int, p_c: float, drop: float, thresholds: np.ndarray, upper: bool) -> np.ndarray:
    """P(B >= b*(C)) (upper) or P(B <= b*(C)) per row of thresholds (columns: c = 0, 1, ...)."""
    cut = window(n, p_c)
    c = np.arange(thresholds.shape[-1])[cut]
    t = thresholds[..., cut]
    weights = binom.pmf(c, n, p_c)
    p = (p_c + drop) / (1 - p_c)
    tail = binom.sf(t - 1, n - c, p) if upper else binom.cdf(t, n - c, p)
    return tail @ weights


class Scan:
    """Exact sizes of one rule at every n and grid discordance, then refined at the worst points."""

    def __init__(self, score_beyond: Score, score_within: Score, args: argparse.Namespace, grid: np.ndarray):
        self.beyond, self.within, self.args, self.grid = score_beyond, score_within, args, grid
        self.cells = np.arange(1, args.cells + 1)
        self.z = ndtri(1 - args.alpha / self.cells)

    def thresholds(self, n: int, p_max: float) -> tuple[np.ndarray, np.ndarray]:
        c = np.arange(window(n, p_max).stop)
        tol = self.args.tolerance
        return regression_thresholds(self.beyond, n, c, self.z, tol), pass_thresholds(self.within, n, c, self.z[0], tol)

    def rates(self, n: int, p_c: float, found: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[float, int, float, float]:
        """(worst m * size(alpha / m), its m, that m's independent-cells rate, false pass) at (n, p_c)."""
        regression, passing = found if found is not None else self.thresholds(n, p_c)
        size = reject_prob(n, p_c, self.args.tolerance, regression, True)
        bound = self.cells * size
        m = int(bound.argmax())
        false_pass = float(reject_prob(n, p_c, self.args.tolerance, passing[None, :], False)[0])
        return float(bound[m]), m + 1, float(1 - (1 - size[m]) ** (m + 1)), false_pass

    def run(self) -> dict[str, tuple[float, ...]]:
        args, worst_fwer, worst_pass, independent = self.args, [], [], 0.0
        for n in range(args.min_n, args.max_n + 1, args.step):
            # Past --every-n-to, only the discordances with few expected c (<= LATTICE) are
            # taken at every n; the others, whose spread of c smooths the lattice, every STRIDE-th.
            full = n <= args.every_n_to or n % STRIDE == 0
            grid = self.grid if full else self.grid[self.grid * n <= LATTICE]
            found = self.thresholds(n, grid[-1])
            for i, p_c in enumerate(grid):
                fwer, m, ind, false_pass = self.rates(n, p_c, found)
                worst_fwer.append((fwer, n, i, m))
                worst_pass.append((false_pass, n, i))
                independent = max(independent, ind)
        refined = {}
        for name, rows, col in (("fwer", worst_fwer, 0), ("pass", worst_pass, 3)):
            best = (-1.0,)
            for row in sorted(rows, reverse=True)[: args.refine]:
                n, i = row[1], row[2]
                lo, hi = self.grid[max(i - 1, 0)], self.grid[min(i + 1, len(self.grid) - 1)]
                found = minimize_scalar(
                    lambda p, n=n, col=col: -self.rates(n, p)[col], bounds=(lo, hi), method="bounded", options={"xatol": 1e-6}
                )
                for p_c in (self.grid[i], float(found.x)):
                    rate = self.rates(n, p_c)
                    if rate[col] > best[0]:
                        best = (rate[col], n, 2 * p_c, rate[1]) if name == "fwer" else (rate[col], n, 2 * p_c)
            refined[name] = best
        refined["independent"] = (independent,)
        return refined


def power(score: Score, n: int, discordance: float, drop: float, tol: float, level: float) -> float:
    """Exact chance that one cell with `drop` (and `discordance` besides it) rejects at `level`."""
    p_c = discordance / 2
    c = np.arange(window(n, p_c).stop)
    thresholds = regression_thresholds(score, n, c, np.array([ndtri(1 - level)]), tol)
    return float(reject_prob(n, p_c, drop, thresholds, True)[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--tolerance", type=float, default=0.03)
    parser.add_argument("--min-n", type=int, default=30)
    parser.add_argument("--max-n", type=int, default=5000)
    parser.add_argument("--step", type=int, default=1, help="Enumerate every step-th n (1: every n, the guarantee's check).")
    parser.add_argument("--every-n-to", type=int, default=1500, help="Up to this n every discordance at every n; see the docstring.")
    parser.add_argument("--before-step", type=int, default=5, help="The rule before is scanned every this many n.")
    parser.add_argument("--cells", type=int, default=20)
    parser.add_argument("--max-discordance", type=float, default=0.3, help="Largest share of flips besides the drop, 2 p_c.")
    parser.add_argument("--grid", type=int, default=16, help="Discordance grid points (0 and a geometric grid up to the maximum).")
    parser.add_argument("--refine", type=int, default=6, help="Worst grid points refined by a scalar search, per side.")
    args = parser.parse_args()
    start = time.perf_counter()
    top = args.max_discordance / 2
    grid = np.r_[0.0, top * np.geomspace(1e-3, 1.0, args.grid - 1)]
    print(
        f"Exact worst cases, alpha {args.alpha}, tolerance {args.tolerance}, n {args.min_n}..{args.max_n} (before: every "
        f"{args.before_step}th), "
        f"discordance besides the drop 0..{args.max_discordance}, 1..{args.cells} cells"
    )
    print(f"{'rule':>7} | {'false regression (any dependence)':>44} | {'independent':>11} | {'false pass (per cell)':>32}")
    failed = False
    for name, (beyond, within) in RULES.items():
        scan_args = argparse.Namespace(**{**vars(args), "step": args.step if name == "now" else args.before_step})
        found = Scan(beyond, within, scan_args, grid).run()
        fwer, n_f, disc_f, m = found["fwer"]
        false_pass, n_p, disc_p = found["pass"]
        print(
            f"{name:>7} | {fwer:>7.2%} (n={n_f}, discordance {disc_f:.4f}, {m} cells) | {found['independent'][0]:>11.2%} | "
            f"{false_pass:>7.2%} (n={n_p}, discordance {disc_p:.4f})"
        )
        if name == "now":
            failed = fwer > args.alpha or false_pass > args.alpha
    print("\nExact power of one cell of 13 (level alpha/13, Holm's first step) at a 5-point drop:")
    for n in (200, 1319):
        for disc in (0.0, 0.036, 0.09):
            figures = "  ".join(
                f"{name} {power(beyond, n, disc, 0.05, args.tolerance, args.alpha / 13):.1%}" for name, (beyond, _) in RULES.items()
            )
            print(f"  n={n:>5} discordance {disc:<5}: {figures}")
    print(f"\n{time.perf_counter() - start:.0f} s")
    if failed:
        print(f"FAIL: the current rule's worst case exceeds alpha {args.alpha}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
