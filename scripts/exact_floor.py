"""Exact error rates and power of the agreement-floor rule (evalctl/analysis/floor.py), beside the fixed tolerance.

    PYTHONPATH=. python scripts/exact_floor.py [--margins 0.05 0.10 0.15] [--max-n 2000]

No simulation. Per question the warm answer differs from the first cold run or not (W), and so
does the A/A replica (A); the rule is the gate's drop rule on those pairs with the margin as its
tolerance, so its error rates are the drop rule's at that tolerance, enumerated exactly by
`exact_gate.Scan` (read its docstring): for every n from `--min-n` to `--max-n`, at an excess
of exactly the margin (the worst case), over the discordance besides the excess 0 to
`--max-discordance` (any joint law of W and A within a question), 1 to `--cells` floor checks
under any dependence (Holm's m0 * size(alpha / m0)). Exits 1 when a margin's worst
false-regression or false-pass rate exceeds alpha.

The same figures cover the differential of two builds in one sweep (`checks/accuracy.py`): the
candidate's warm outcome paired with the baseline build's on the same prompt is the same rule on
a paired binary outcome at the same margin.

Then the exact power at realistic sizes. A good build's replica and warm answers each differ
from the first cold run with probability f (the floor); a bug makes a further share `bug` of
the warm answers differ: P(W = 1) = 1 - (1 - f)(1 - bug). W and A independent within a
question (the most discordance, the least power; answers that are fragile on both sides
give more). For one cell, at level alpha:
- floor m: the floor rule at margin m (P regression; at bug 0, P pass);
- fixed: the gate before it, on the same cells: agreement with the cache-off answers at the
  tolerance of configs/gate/agreement.yaml (0.15), a regression also above the tolerance plus
  the A/A arm's upper noise bound (`noise.drop_margin`).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from exact_gate import Scan, pass_thresholds, power, window
from scipy.special import ndtri
from scipy.stats import binom

from evalctl.analysis.drop_rule import beyond_score, p_beyond_tolerance, p_within_tolerance, within_score
from evalctl.analysis.noise import Noise, drop_margin

FIXED_TOLERANCE = 0.15  # configs/gate/agreement.yaml
SIZES, FLOORS, BUGS = (40, 100, 200), (0.0, 0.02, 0.05, 0.10), (0.10, 0.20, 0.30, 0.50)


def warm_rate(floor: float, bug: float) -> float:
    return 1 - (1 - floor) * (1 - bug)


def floor_rates(n: int, floor: float, bug: float, margin: float, alpha: float) -> tuple[float, float]:
    """(P regression, P pass) of one floor check: W and A independent, the excess p_b - p_c = w - f."""
    w = warm_rate(floor, bug)
    p_c = (1 - w) * floor  # the replica alone differs
    regression = power(beyond_score, n, 2 * p_c, w - floor, margin, alpha)
    c = np.arange(window(n, p_c).stop)
    most = pass_thresholds(within_score, n, c, float(ndtri(1 - alpha)), margin)
    # P(B <= b*(C)): B | C ~ Bin(n - C, p_b / (1 - p_c)), C ~ Bin(n, p_c)
    p = w * (1 - floor) / (1 - p_c) if p_c < 1 else 0.0
    passed = float(binom.cdf(most, n - c, p) @ binom.pmf(c, n, p_c))
    return regression, passed


def fixed_rates(n: int, floor: float, bug: float, alpha: float) -> tuple[float, float]:
    """(P regression, P pass) of the fixed-tolerance rule: warm disagreements k ~ Bin(n, w) judged against
    zero at FIXED_TOLERANCE, a regression also above it plus the upper bound of the replica's a ~ Bin(n, f)."""
    w, k, a = warm_rate(floor, bug), np.arange(n + 1), np.arange(n + 1)
    beyond = (p_beyond_tolerance(k, 0, n, FIXED_TOLERANCE) <= alpha)[:, None]
    margins = np.array([drop_margin(FIXED_TOLERANCE, alpha, Noise("p", "c", n, int(x), 0)) for x in a])
    regression = beyond & (k[:, None] / n > margins[None, :])
    weights = binom.pmf(k, n, w)[:, None] * binom.pmf(a, n, floor)[None, :]
    passed = (p_within_tolerance(k, 0, n, FIXED_TOLERANCE) <= alpha) @ binom.pmf(k, n, w)
    return float((weights * regression).sum()), float(passed)


def guarantee(args: argparse.Namespace, grid: np.ndarray) -> bool:
    print(
        f"Exact worst cases, alpha {args.alpha}, n {args.min_n}..{args.max_n}, discordance besides the excess "
        f"0..{args.max_discordance}, 1..{args.cells} floor checks"
    )
    print(f"{'margin':>6} | {'false regression (any dependence)':>44} | {'false pass (per cell)':>32}")
    failed = False
    for margin in args.margins:
        scan = Scan(beyond_score, within_score, argparse.Namespace(**{**vars(args), "tolerance": margin, "step": 1}), grid)
        found = scan.run()
        fwer, n_f, disc_f, m = found["fwer"]
        false_pass, n_p, disc_p = found["pass"]
        worst_regression = f"{fwer:>7.2%} (n={n_f}, discordance {disc_f:.4f}, {m} cells)"
        print(f"{margin:>6} | {worst_regression} | {false_pass:>7.2%} (n={n_p}, discordance {disc_p:.4f})")
        failed |= fwer > args.alpha or false_pass > args.alpha
    return failed


def power_table(args: argparse.Namespace) -> None:
    rules = [f"floor {m}" for m in args.margins] + [f"fixed {FIXED_TOLERANCE}"]
    print("\nExact P(regression) of one cell; W and A independent within a question")
    print(f"{'n':>4} {'floor':>5} {'bug':>4} {'warm':>5} | " + " | ".join(f"{r:>10}" for r in rules))
    for n in SIZES:
        for floor in FLOORS:
            for bug in BUGS:
                figures = [floor_rates(n, floor, bug, m, args.alpha)[0] for m in args.margins] + [fixed_rates(n, floor, bug, args.alpha)[0]]
                print(f"{n:>4} {floor:>5} {bug:>4} {warm_rate(floor, bug):>5.3f} | " + " | ".join(f"{x:>10.1%}" for x in figures))
    print("\nGood build (bug 0): exact P(pass) of one cell, and P(regression) (at most alpha by the guarantee above)")
    print(f"{'n':>4} {'floor':>5} | " + " | ".join(f"{r:>16}" for r in rules))
    for n in SIZES:
        for floor in FLOORS:
            rates = [floor_rates(n, floor, 0.0, m, args.alpha) for m in args.margins] + [fixed_rates(n, floor, 0.0, args.alpha)]
            print(f"{n:>4} {floor:>5} | " + " | ".join(f"pass {p:>5.1%} reg {r:>4.1%}" for r, p in rates))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--margins", type=float, nargs="+", default=[0.05, 0.10, 0.15])
    parser.add_argument("--min-n", type=int, default=20)
    parser.add_argument("--max-n", type=int, default=2000)
    parser.add_argument("--every-n-to", type=int, default=2000, help="Every discordance at every n up to here (exact_gate.Scan).")
    parser.add_argument("--cells", type=int, default=10)
    parser.add_argument(
        "--max-discordance", type=float, default=0.4, help="Largest share of questions on which one side alone differs, besides the excess."
    )
    parser.add_argument("--grid", type=int, default=16)
    parser.add_argument("--refine", type=int, default=6)
    parser.add_argument("--power-only", action="store_true", help="Skip the worst-case scan (seconds instead of minutes).")
    args = parser.parse_args()
    start = time.perf_counter()
    top = args.max_discordance / 2
    grid = np.r_[0.0, top * np.geomspace(1e-3, 1.0, args.grid - 1)]
    failed = False if args.power_only else guarantee(args, grid)
    power_table(args)
    print(f"\n{time.perf_counter() - start:.0f} s")
    if failed:
        print(f"FAIL: a margin's worst case exceeds alpha {args.alpha}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
