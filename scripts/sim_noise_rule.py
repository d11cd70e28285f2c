"""Simulate the gate's noise-aware regression rule (evalctl/analysis/noise.py) against the plain one.

Each rule is the gate's regression test for one cell (`drop_rule.p_beyond_tolerance`, drop
beyond the tolerance at level alpha) plus a margin: none (plain), the A/A noise drop's point
estimate (point), or its upper bound (gate, `noise.drop_margin`).

An engine with no change at all but non-batch-invariant numerics: each run of a question keeps
its reference outcome except that a right answer turns wrong with probability `q_break` and a
wrong one right with `q_fix`. The candidate cell and the A/A arm are both such re-runs. Prints
how often each rule calls that a regression (a false regression), and how often each still
catches a real extra drop of `real` on top of the same noise (power).

    python scripts/sim_noise_rule.py [--sims 4000] [--n 200]
"""

from __future__ import annotations

import argparse

import numpy as np

from evalctl.analysis.drop_rule import p_beyond_tolerance
from evalctl.analysis.noise import Noise, drop_margin

TOLERANCE, ALPHA = 0.03, 0.05


def rerun(ref: np.ndarray, rng: np.random.Generator, q_break: float, q_fix: float, real: float = 0.0) -> np.ndarray:
    flip = np.where(ref, rng.random(ref.size) < q_break + real, rng.random(ref.size) < q_fix)
    return ref ^ flip


def flips(ref: np.ndarray, other: np.ndarray) -> tuple[int, int]:
    return int((ref & ~other).sum()), int((~ref & other).sum())


def regression(b: int, c: int, n: int, noise: Noise | None, point: bool = False) -> bool:
    """The gate's rule for one cell; `point`: the margin from the noise drop's point estimate instead of its upper bound."""
    margin = TOLERANCE + max(0.0, noise.drop) if point and noise is not None else drop_margin(TOLERANCE, ALPHA, noise)
    return bool(p_beyond_tolerance(b, c, n, TOLERANCE) <= ALPHA) and (b - c) / n > margin


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=4000)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--accuracy", type=float, default=0.8)
    parser.add_argument("--real", type=float, default=0.10, help="extra right->wrong probability of a real regression")
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    print(f"n={args.n} questions, reference accuracy {args.accuracy}, tolerance {TOLERANCE}, alpha {ALPHA}, {args.sims} runs each")
    rules = ("plain", "point", "gate")
    names = " ".join(f"{r:>6}" for r in rules)
    print(f"{'noise break/fix':>15} {'A/A flips':>9} | false regression: {names} | power: {names}")
    for q_break, q_fix in ((0.0, 0.0), (0.02, 0.02), (0.05, 0.05), (0.10, 0.10), (0.15, 0.15)):
        counts = np.zeros(6)
        flipped = 0
        for _ in range(args.sims):
            ref = rng.random(args.n) < args.accuracy
            b0, c0 = flips(ref, rerun(ref, rng, q_break, q_fix))
            noise = Noise("p", "ref", args.n, b0, c0)
            flipped += b0 + c0
            for i, real in enumerate((0.0, args.real)):
                b, c = flips(ref, rerun(ref, rng, q_break, q_fix, real))
                counts[3 * i : 3 * i + 3] += [
                    regression(b, c, args.n, None),
                    regression(b, c, args.n, noise, point=True),
                    regression(b, c, args.n, noise),
                ]
        rates = " ".join(f"{r:>6.3f}" for r in counts[:3] / args.sims), " ".join(f"{r:>6.3f}" for r in counts[3:] / args.sims)
        print(f"{q_break:>7.2f}/{q_fix:<7.2f} {flipped / args.sims / args.n:>9.1%} | {'':18}{rates[0]} | {'':7}{rates[1]}")


if __name__ == "__main__":
    main()
