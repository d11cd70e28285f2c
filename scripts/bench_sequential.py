"""Simulate paired sweeps and judge each twice: the sequential gate, and the fixed-n gate on all questions.

    PYTHONPATH=. python scripts/bench_sequential.py [--runs 10000] [--questions 1319] [--cells 7]

Each run has `cells` candidate cells (a nightly sweep's 7 shot counts, cache on vs off), each
paired with its reference on `questions` questions. Baseline accuracy is 0.9; a healthy pair
disagrees on a share `discordance` of the questions (half each way); a drop of d adds d to the
right->wrong flips. "Long cells" are the last three. Both gates see the same simulated answers:
the fixed-n gate is `evalctl gate`'s accuracy rule (`drop_rule.decide_drops`) on all questions.
Then the cases where the audit of issue 25 found the guarantees broken, sequential beside
fixed-n: flips that go one way (no discordance besides a drop of exactly the tolerance), and a
drop that changes along the send order (5 points in the first half, 1 in the second, and the
reverse: on average the tolerance, so every regression and every pass is false). Prints the
verdicts, the error rates and the requests used, then the targets, each marked met or not.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from evalctl.analysis.drop_rule import decide_drops
from evalctl.analysis.sequential import CellStatus, Design, decide

LONG_CELLS = 3
REALISTIC, STRESS = 0.036, 0.09


def simulate(drops: np.ndarray, discordance: float, sizes: np.ndarray, runs: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Cumulative (b, c, n) at each look, shape (runs, cells, looks), from per-look multinomial draws."""
    p_b = discordance / 2 + (drops if drops.ndim == 2 else drops[:, None])  # a drop per cell, or per cell and look
    p_c = np.full_like(p_b, discordance / 2)
    steps = np.diff(sizes, prepend=0)[None, :]
    shape = (runs, drops.shape[0], sizes.size)
    b = rng.binomial(np.broadcast_to(steps, shape), np.broadcast_to(p_b, shape))
    c = rng.binomial(steps - b, np.broadcast_to(p_c / (1 - p_b), shape))
    n = np.broadcast_to(sizes, shape)
    return b.cumsum(axis=-1), c.cumsum(axis=-1), n


def summarise(status: np.ndarray, used: np.ndarray, drops: np.ndarray, tolerance: float, questions: int) -> dict[str, float]:
    regression = status == CellStatus.REGRESSION
    verdict = np.where(regression.any(-1), "regression", np.where((status == CellStatus.PASS).all(-1), "pass", "inconclusive"))
    dropped, healthy = drops > tolerance, drops == 0
    share = used / questions
    return {
        "pass": float((verdict == "pass").mean()),
        "regression": float((verdict == "regression").mean()),
        "inconclusive": float((verdict == "inconclusive").mean()),
        "false_regression": float(regression[:, drops <= tolerance].any(-1).mean()),
        "detected": float(regression[:, dropped].any(-1).mean()) if dropped.any() else float("nan"),
        "healthy_cell_pass": float((status[:, healthy] == CellStatus.PASS).mean()) if healthy.any() else float("nan"),
        "false_pass": float((status[:, drops >= tolerance] == CellStatus.PASS).mean()) if (drops >= tolerance).any() else float("nan"),
        "requests_dropped": float(share[:, dropped].mean()) if dropped.any() else float("nan"),
        "requests_healthy": float(share[:, healthy].mean()) if healthy.any() else float("nan"),
        "requests_all": float(share.mean()),
        "verdict": verdict,
    }


def agreement(seq: dict, fixed: dict) -> float:
    both = np.isin(seq["verdict"], ("pass", "regression")) & np.isin(fixed["verdict"], ("pass", "regression"))
    return float((seq["verdict"][both] == fixed["verdict"][both]).mean()) if both.any() else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10000)
    parser.add_argument("--questions", type=int, default=1319)
    parser.add_argument("--cells", type=int, default=7)
    parser.add_argument("--tolerance", type=float, default=0.03)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--growth", type=float, default=Design.growth)
    parser.add_argument("--pass-gamma", type=float, default=Design.pass_gamma)
    parser.add_argument("--regression-gamma", type=float, default=Design.regression_gamma)
    parser.add_argument("--e-share", type=float, default=Design.e_share)
    parser.add_argument("--seed", type=int, default=15)
    args = parser.parse_args()
    started = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    design = Design(
        args.questions,
        args.tolerance,
        args.alpha,
        growth=args.growth,
        pass_gamma=args.pass_gamma,
        regression_gamma=args.regression_gamma,
        e_share=args.e_share,
    )
    sizes = design.look_sizes
    long_cells = np.arange(args.cells) >= args.cells - LONG_CELLS
    scenarios = {
        "no drop": np.zeros(args.cells),
        "drop = tol everywhere": np.full(args.cells, args.tolerance),
        "5 points, long cells": np.where(long_cells, 0.05, 0.0),
        "20 points, long cells": np.where(long_cells, 0.20, 0.0),
    }
    print(
        f"{args.runs} runs x {args.cells} cells x {args.questions} questions; tol {args.tolerance}, alpha {args.alpha}; "
        f"sequential: {sizes.size} looks at {sizes[0]}, then x{args.growth} each; HSD gamma pass {args.pass_gamma}, "
        f"regression {args.regression_gamma}; e-process share {args.e_share}"
    )
    header = (
        f"{'scenario':<24} {'disc':>5} {'gate':<6} {'pass':>6} {'regr':>6} {'incon':>6} {'falseR':>7} {'detect':>7} {'okPass':>7} "
        f"{'reqDrop':>8} {'reqOK':>6} {'reqAll':>7} {'agree':>6}"
    )
    print(header)
    print("-" * len(header))
    results: dict[tuple[str, float], tuple[dict, dict]] = {}
    for discordance in (REALISTIC, STRESS):
        for name, drops in scenarios.items():
            b, c, n = simulate(drops, discordance, sizes, args.runs, rng)
            seq = decide(b, c, n, design)
            used = np.take_along_axis(n, seq.look[..., None], axis=-1)[..., 0]
            seq_sum = summarise(seq.status, used, drops, args.tolerance, args.questions)
            regressions = seq.status == CellStatus.REGRESSION
            seq_sum["by_e_process"] = float(seq.by_e_process[regressions].mean()) if regressions.any() else float("nan")
            fixed = decide_drops(b[..., -1], c[..., -1], n[..., -1], args.tolerance, args.alpha).status
            fixed = np.select([fixed == "pass", fixed == "regression"], [CellStatus.PASS, CellStatus.REGRESSION], CellStatus.INCONCLUSIVE)
            fixed_sum = summarise(fixed, np.full(used.shape, args.questions), drops, args.tolerance, args.questions)
            results[(name, discordance)] = (seq_sum, fixed_sum)
            for label, s in (("seq", seq_sum), ("fixed", fixed_sum)):
                row = [s[k] for k in ("pass", "regression", "inconclusive", "false_regression", "detected", "healthy_cell_pass")]
                req = [s[k] for k in ("requests_dropped", "requests_healthy", "requests_all")]
                agree = agreement(seq_sum, fixed_sum) if label == "seq" else float("nan")
                cols = " ".join(f"{v:>6.1%}" if not np.isnan(v) else f"{'-':>6}" for v in row[:3])
                cols += " " + " ".join(f"{v:>7.1%}" if not np.isnan(v) else f"{'-':>7}" for v in row[3:])
                cols += f" {req[0]:>8.1%}" if not np.isnan(req[0]) else f" {'-':>8}"
                cols += " " + " ".join(f"{v:>6.1%}" if not np.isnan(v) else f"{'-':>6}" for v in req[1:2])
                cols += f" {req[2]:>7.1%}" + (f" {agree:>6.1%}" if not np.isnan(agree) else f" {'-':>6}")
                print(f"{name if label == 'seq' else '':<24} {discordance if label == 'seq' else '':>5} {label:<6} {cols}")
    # Where the audit found the guarantees broken: flips that go one way, and a drop that
    # changes along the send order (5 points lost in the first half and 1 in the second, and
    # the reverse; on average the tolerance, so a regression and a pass are both false).
    half = (np.diff(sizes, prepend=0) / 2 + np.r_[0, sizes[:-1]]) <= args.questions / 2
    edges = {
        "one-way, drop = tol": (np.full(args.cells, args.tolerance), 0.0),
        "drift 5 then 1 points": (np.where(half, 0.05, 0.01)[None, :].repeat(args.cells, 0), REALISTIC),
        "drift 1 then 5 points": (np.where(half, 0.01, 0.05)[None, :].repeat(args.cells, 0), REALISTIC),
    }
    for name, (drops, discordance) in edges.items():
        b, c, n = simulate(drops, discordance, sizes, args.runs, rng)
        seq = decide(b, c, n, design)
        fixed = decide_drops(b[..., -1], c[..., -1], n[..., -1], args.tolerance, args.alpha).status
        mean = drops if drops.ndim == 1 else np.full(args.cells, args.tolerance)
        used = np.take_along_axis(n, seq.look[..., None], axis=-1)[..., 0]
        seq_sum = summarise(seq.status, used, mean, args.tolerance, args.questions)
        fixed = np.select([fixed == "pass", fixed == "regression"], [CellStatus.PASS, CellStatus.REGRESSION], CellStatus.INCONCLUSIVE)
        fixed_sum = summarise(fixed, np.full(fixed.shape, args.questions), mean, args.tolerance, args.questions)
        results[(name, discordance)] = (seq_sum, fixed_sum)
        flagged = float(seq.drift.mean())
        print(
            f"{name:<24} {discordance:>5} seq/fixed: false regression {seq_sum['false_regression']:.1%} / "
            f"{fixed_sum['false_regression']:.1%}, cells passed {seq_sum['false_pass']:.1%} / {fixed_sum['false_pass']:.1%}; "
            f"drift flagged at the deciding look in {flagged:.0%} of cells"
        )
    print()
    for discordance in (REALISTIC, STRESS):
        shares = "; ".join(f"{name} {results[(name, discordance)][0]['by_e_process']:.0%}" for name in list(scenarios)[2:])
        print(f"regressions shown by the e-process rather than the bound, disc {discordance}: {shares}")
    print()
    print("falseR: runs with a false regression; okPass: healthy cells passed; reqDrop/reqOK/reqAll: share of")
    print("planned requests in dropped cells / healthy cells / all cells; agree: same verdict where both decide")
    print()
    print(f"targets (the issue asks for all at discordance {REALISTIC}, the healthy ones at {STRESS} too):")
    slack = args.alpha + 2 * np.sqrt(args.alpha * (1 - args.alpha) / args.runs)
    for discordance in (REALISTIC, STRESS):
        none_seq, none_fixed = results[("no drop", discordance)]
        tol_seq, tol_fixed = results[("drop = tol everywhere", discordance)]
        big_seq, _ = results[("20 points, long cells", discordance)]
        five_seq, five_fixed = results[("5 points, long cells", discordance)]
        targeted = discordance == REALISTIC
        checks = [
            (True, f"no drop: false regression {none_seq['false_regression']:.1%} <= alpha", none_seq["false_regression"] <= args.alpha),
            (
                True,
                f"drop = tol: false regression {tol_seq['false_regression']:.1%} (fixed {tol_fixed['false_regression']:.1%}) "
                f"<= alpha + 2 Monte Carlo SE ({slack:.1%})",
                tol_seq["false_regression"] <= slack,
            ),
            (
                True,
                f"drop = tol: cells passed {tol_seq['false_pass']:.1%} (fixed {tol_fixed['false_pass']:.1%}) <= alpha + 2 SE ({slack:.1%})",
                tol_seq["false_pass"] <= slack,
            ),
            (targeted, f"20 points: detected {big_seq['detected']:.1%} >= 99%", big_seq["detected"] >= 0.99),
            (targeted, f"20 points: long cells used {big_seq['requests_dropped']:.1%} <= 10%", big_seq["requests_dropped"] <= 0.10),
            (
                targeted,
                f"5 points: detected {five_seq['detected']:.1%} >= fixed {five_fixed['detected']:.1%} - 5 points",
                five_seq["detected"] >= five_fixed["detected"] - 0.05,
            ),
            (
                targeted,
                f"5 points: run used {five_seq['requests_all']:.1%} <= 60% (long cells {five_seq['requests_dropped']:.1%})",
                five_seq["requests_all"] <= 0.60,
            ),
            (True, f"healthy cells used {none_seq['requests_healthy']:.1%} <= 60%", none_seq["requests_healthy"] <= 0.60),
            (
                True,
                f"healthy cells pass {none_seq['healthy_cell_pass']:.1%} >= fixed {none_fixed['healthy_cell_pass']:.1%} - 2 points "
                f"(whole runs {none_seq['pass']:.1%} vs {none_fixed['pass']:.1%})",
                none_seq["healthy_cell_pass"] >= none_fixed["healthy_cell_pass"] - 0.02,
            ),
            (
                True,
                f"verdicts agree where both decide: {min(agreement(*results[(name, discordance)]) for name in scenarios):.1%} >= 95%",
                min(agreement(*results[(name, discordance)]) for name in scenarios) >= 0.95,
            ),
        ]
        if discordance == REALISTIC:
            limit = args.alpha + 0.01
            for (name, disc), (seq_sum, fixed_sum) in results.items():
                if name in edges:
                    for side, key in (("false regression", "false_regression"), ("cells passed", "false_pass")):
                        text = f"{name} (disc {disc}): {side} {seq_sum[key]:.1%} (fixed {fixed_sum[key]:.1%}) <= alpha + 1 point"
                        checks.append((True, text, seq_sum[key] <= limit))
        for target, text, ok in checks:
            mark = ("met" if ok else "NOT MET") if target else ("info" if ok else "info, short")
            print(f"  [{mark}] disc {discordance}: {text}")
    print(f"\n{time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
