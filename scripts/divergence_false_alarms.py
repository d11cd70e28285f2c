"""Measure the divergence rung's false-alarm rate (evalctl/analysis/divergence.py) by simulation; exit 1 above alpha.

The rung (`divergence.exceedances`): K judged divergences above the largest of the reference's plus a
margin, p = C(n, k) / C(n + m, k), regression when p <= alpha. Its guarantee: false regression <= alpha
whenever the judged and reference divergences are exchangeable, whatever their law, ties included.
Here both come from one law (no bug), for laws a healthy engine shows: continuous drift, a
deterministic engine's zeros with rare drift (ties at 0), drift rounded to a few values (ties at
the maximum), a heavy tail, and all zeros; at sizes from 5 judged against 200 reference pairs to 100
against 20; margins 0 (the bare test) and 0.1 nats (the default). The rate must stay within
alpha + 3 standard errors of the simulation. Also printed, not judged: power against a bug that
moves a share of returns by 0.35-0.64 nats (llama.cpp #24411), and the false-alarm rate when
healthy returns drift more than extensions (1.5x: what the margin is for). Judged, through the rung
itself: healthy returns of which a third recompute more of their prompt than any extension did and
drift 10x (another prefill split), whose rate must stay within the same limit once the rung leaves
them out (the reference's support), beside the rate with every return judged.

    python scripts/divergence_false_alarms.py [--sims 4000] [--alpha 0.05] [--seed 1]
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np
import pandas as pd

from evalctl.analysis.divergence import Settings, divergence_rung, exceedances

SIZES = [(5, 200), (10, 30), (20, 20), (40, 40), (40, 80), (100, 20)]
MARGINS = [0.0, 0.1]


def laws(rng: np.random.Generator) -> dict:
    """Healthy divergence laws (nats): name -> draw(size, scale)."""
    return {
        "half-normal 0.03": lambda k, s=1.0: np.abs(rng.normal(0, 0.03 * s, k)),
        "70% zeros, else exp 0.03": lambda k, s=1.0: np.where(rng.random(k) < 0.7, 0.0, rng.exponential(0.03 * s, k)),
        "rounded to 0.02": lambda k, s=1.0: np.round(np.abs(rng.normal(0, 0.03 * s, k)) / 0.02) * 0.02,
        "|t_2| x 0.02": lambda k, s=1.0: np.abs(rng.standard_t(2, k)) * 0.02 * s,
        "all zeros": lambda k, s=1.0: np.zeros(k),
    }


def rate(draw, n: int, m: int, margin: float, alpha: float, sims: int, judged_scale: float = 1.0, bug=None) -> float:
    hits = 0
    for _ in range(sims):
        judged, reference = draw(n, judged_scale), draw(m)
        if bug is not None:
            judged = bug(judged)
        count, _, p = exceedances(judged, reference, margin)
        hits += count > 0 and p <= alpha
    return hits / sims


def support_rates(rng: np.random.Generator, alpha: float, sims: int, n: int = 16, m: int = 32) -> dict[bool, float]:
    """False regressions of `divergence_rung` on pairs with no bug, where a third of the returns recompute 600-1,100 tokens
    (extensions 1-400) and drift 10x: judged all (the rule's support ignored) and as the rung judges (left out)."""
    hits = {False: 0, True: 0}
    for _ in range(sims):
        recompute = np.concatenate(
            [np.where(rng.random(n) < 1 / 3, rng.integers(600, 1100, n), rng.integers(1, 400, n)), rng.integers(1, 400, m)]
        )
        drift = np.abs(rng.normal(0, 0.03, n + m)) * np.where(recompute > 400, 10.0, 1.0)
        pairs = pd.DataFrame({"turn_kind": ["rewind"] * n + ["extend"] * m, "prompt_tokens": 1200, "cached_tokens": 1200 - recompute})
        pairs = pairs.assign(divergence=drift, positions=4, exact=False, first_divergence=None, doc_id=range(n + m))
        for rule in (False, True):  # the rule ignored: every extension said to recompute 1,100 tokens, covering every return
            judged = (
                pairs if rule else pairs.assign(cached_tokens=np.where(pairs["turn_kind"] == "extend", 1200 - 1100, pairs["cached_tokens"]))
            )
            row = divergence_rung(judged, Settings())
            hits[rule] += row is not None and row.p_value is not None and row.exceeding > 0 and row.p_value <= alpha
    return {rule: count / sims for rule, count in hits.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=4000)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    limit = args.alpha + 3 * math.sqrt(args.alpha * (1 - args.alpha) / args.sims)
    worst, failed = 0.0, []
    print(f"false-alarm rate (no bug), alpha {args.alpha}, {args.sims} simulations each; fails above {limit:.4f}")
    print(f"{'law':26} {'n':>4} {'m':>4} " + " ".join(f"margin {margin:<4}" for margin in MARGINS))
    for name, draw in laws(rng).items():
        for n, m in SIZES:
            rates = [rate(draw, n, m, margin, args.alpha, args.sims) for margin in MARGINS]
            worst = max(worst, *rates)
            failed += [(name, n, m) for r in rates if r > limit]
            print(f"{name:26} {n:>4} {m:>4} " + " ".join(f"{r:<11.4f}" for r in rates))
    print(f"largest false-alarm rate: {worst:.4f}")

    def bug(share: float):
        def moved(judged: np.ndarray) -> np.ndarray:
            hit = rng.random(judged.size) < share
            return np.where(hit, judged + rng.uniform(0.35, 0.64, judged.size), judged)

        return moved

    draw = laws(rng)["half-normal 0.03"]
    print("\npower (half-normal 0.03 drift; a share of returns moved by 0.35-0.64 nats), margin 0.1:")
    for share in (0.1, 0.2):
        powers = [rate(draw, n, m, 0.1, args.alpha, 1000, bug=bug(share)) for n, m in SIZES]
        print(f"  {share:.0%} of returns moved: " + ", ".join(f"n {n} m {m}: {p:.2f}" for (n, m), p in zip(SIZES, powers)))
    print("\nhealthy returns drifting 1.5x the reference (not exchangeable), half-normal 0.03:")
    for margin in MARGINS:
        print(f"  margin {margin}: " + ", ".join(f"n {n} m {m}: {rate(draw, n, m, margin, args.alpha, 1000, 1.5):.3f}" for n, m in SIZES))
    outside = support_rates(rng, args.alpha, 1000)
    print("\nhealthy returns of which a third recompute more of their prompt than any extension and drift 10x (the split:")
    print("llama.cpp 2026.7.10068's early-checkpoint returns), n 16 m 32, margin 0.1, the rung itself (`divergence_rung`):")
    print(f"  judged all: {outside[False]:.3f}; beyond the reference's support left out: {outside[True]:.3f}")
    failed += [("outside the support", 16, 32)] if outside[True] > limit else []
    if failed:
        print(f"FAILED: false-alarm rate above {limit:.4f} for {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
