"""How many questions a cell the default sweep needs for a healthy server to pass the cpu-smoke gate.

Exact enumeration over every (b, c) flip count of a cell of n pairs, for a healthy server whose
cache-on and cache-off answers disagree at rate d, symmetrically (b and c each d / 2: no true
drop). A cell passes when the gate's pass test (`drop_rule.p_within_tolerance`) rejects "drop
>= tolerance" at alpha; the sweep passes when every cell does (cells taken as independent).
Sizing the default down must keep the pass probability high at the discordance the bundled
model shows (about 5 flips in 100 pairs over 5 seeds), so this fixes the questions a cell, and
the 3-minute target has to come from the prompts' length (short lists, each shared by as many
questions as it has records: configs/smollm2-135m.yaml) or the engine's speed.

    python scripts/smoke_pass_probability.py [--tolerance 0.15] [--alpha 0.05] [--cells 1]
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.stats import multinomial

from evalctl.analysis.drop_rule import p_within_tolerance


def cell_pass_probability(n: int, discordance: float, tolerance: float, alpha: float) -> float:
    """P(the pass test rejects) for one cell of n pairs with symmetric discordance."""
    b, c = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    b, c = b[b + c <= n], c[b + c <= n]
    half = discordance / 2
    mass = multinomial.pmf(np.stack([b, c, n - b - c], axis=1), n, [half, half, 1 - discordance])
    passes = p_within_tolerance(b, c, np.full(b.shape, n), tolerance) <= alpha
    return float(mass[passes].sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tolerance", type=float, default=0.15)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--cells", type=int, default=1, help="lengths of the sweep (the default has three)")
    args = parser.parse_args()
    ns = (30, 40, 50, 60, 70, 80)
    print(f"P(pass) of {args.cells} healthy cells, tolerance {args.tolerance}, alpha {args.alpha}")
    print("discordance " + "".join(f"{f'n={n}':>9}" for n in ns))
    for d in (0.02, 0.04, 0.06, 0.08):
        row = [cell_pass_probability(n, d, args.tolerance, args.alpha) ** args.cells for n in ns]
        print(f"{d:11.2f} " + "".join(f"{p:9.3f}" for p in row))


if __name__ == "__main__":
    main()
