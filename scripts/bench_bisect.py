"""Simulated bisects over 64 builds: the noise-aware search with sequential steps beside plain bisection.

    PYTHONPATH=. python scripts/bench_bisect.py [--bisects 1000] [--questions 1319]

Each bisect has 64 builds in commit order (build 0 the good endpoint, 63 the bad one) and one
culprit, uniform over 1..63, from which on the regressed cells drop by an effect drawn from
`--effects` (each cell alike). A healthy build's answers disagree with the reference on a share
`discordance` of the questions, half each way (0.036 realistic for a batch-variant GPU engine
at temperature 0, 0.09 a stress case); a build's answers are drawn once (a relaunch of the same
build repeats them), and a share `--flaky` of launches fail (skipped).

- **noise-aware** (`evalctl bisect`): `bisect.search.choose` (the culprit posterior, the test at
  its median), each step judged by the real sequential rule (`analysis.sequential.decide`) at
  the steps' alpha, stopped as soon as it is decided; the bad endpoint is verified first.
- **plain**: `git bisect run` with `evalctl gate --bisect-exit-codes` on a fixed-n run of every
  question (the gate's rule, `drop_rule.decide_drops`, alpha 0.05): good/bad trusted, an
  inconclusive or failed step skipped (the untested build nearest the middle is tried next).

Prints how often each names the right culprit (target >= 95% for noise-aware), launches (mean,
95th percentile; after the two endpoints too), and requests per step against the fixed-n step.
Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, replace

import numpy as np
from bench_sequential import simulate

from evalctl.analysis.drop_rule import decide_drops
from evalctl.analysis.sequential import CellStatus, Design, decide
from evalctl.bisect.search import Observation, Verdict, choose, default_budget, step_tolerance

TARGET_FOUND = 0.95


@dataclass(frozen=True)
class Builds:
    """One simulated bisect: every build's step verdict and requests, sequential and fixed-n."""

    culprit: int
    sequential: list[Verdict]
    sequential_requests: np.ndarray
    fixed: list[Verdict]


def draw(builds: int, cells: int, effect: float, discordance: float, design: Design, alpha_fixed: float, rng) -> Builds:
    culprit = int(rng.integers(1, builds))
    sizes = design.look_sizes
    b, c, n = (np.concatenate(parts) for parts in zip(
        simulate(np.zeros(cells), discordance, sizes, culprit, rng),
        simulate(np.full(cells, effect), discordance, sizes, builds - culprit, rng),
    ))  # fmt: skip
    # The bad endpoint runs every question, judged by the gate's rule; the other steps test at
    # half its drop (bisect.search.step_tolerance), stopped by the sequential rule.
    fixed = decide_drops(b[..., -1], c[..., -1], n[..., -1], design.tolerance, alpha_fixed, design.min_n).status
    regressed = fixed[-1] == "regression"
    pooled = [int(x[-1, regressed, -1].sum()) for x in (b, c, n)]
    seq = decide(b, c, n, replace(design, tolerance=step_tolerance(design.tolerance, *pooled)))
    answered = np.where(seq.look >= 0, sizes[np.maximum(seq.look, 0)], sizes[-1])

    def verdict(regression: np.ndarray, passed: np.ndarray) -> list[Verdict]:
        return [Verdict.bad if r.any() else Verdict.good if p.all() else Verdict.unknown for r, p in zip(regression, passed)]

    sequential = verdict(seq.status == CellStatus.REGRESSION, seq.status == CellStatus.PASS)
    plain = verdict(fixed == "regression", fixed == "pass")
    requests = answered.sum(axis=-1)
    requests[-1] = n[-1, :, -1].sum()
    return Builds(culprit, sequential[:-1] + plain[-1:], requests, plain)


@dataclass
class Outcome:
    named: int | None
    launches: int
    requests: list[int]


def noise_aware(world: Builds, flaky: float, error: float, budget: int, rng) -> Outcome:
    builds = len(world.sequential)
    observations: list[Observation] = []
    out = Outcome(None, 1, [])  # the reference launch of the good build

    def test(i: int) -> Verdict:
        out.launches += 1
        if rng.random() < flaky:
            verdict = Verdict.skipped
        else:
            verdict = world.sequential[i]
            out.requests.append(int(world.sequential_requests[i]))
        observations.append(Observation(i, verdict))
        return verdict

    while (v := test(builds - 1)) is Verdict.skipped and out.launches < budget:
        pass
    if v is not Verdict.bad:
        return out  # not reproduced: nothing named
    while out.launches < budget:
        step = choose(builds, observations, set(), error)
        if step.build is None:
            break
        test(step.build)
    step = choose(builds, observations, set(), error)
    if step.culprit.probability >= TARGET_FOUND and len(step.culprit.builds) == 1:
        out.named = step.culprit.builds[0]
    return out


def plain(world: Builds, flaky: float, budget: int, rng, questions: int, cells: int) -> Outcome:
    """git bisect: trusts each verdict; an inconclusive or failed step is `skip`ped."""
    builds = len(world.fixed)
    good, bad = 0, builds - 1
    out = Outcome(None, 2, [questions * cells] * 2)  # both endpoints run in full
    skipped: set[int] = set()
    while bad - good > 1 and out.launches < budget:
        inner = [i for i in range(good + 1, bad) if i not in skipped]
        if not inner:
            return out  # only skipped builds left: "the first bad commit could be any of"
        mid = min(inner, key=lambda i: (abs(i - (good + bad) / 2), i))
        out.launches += 1
        if rng.random() < flaky or world.fixed[mid] is Verdict.unknown:
            skipped.add(mid)
            if world.fixed[mid] is Verdict.unknown:
                out.requests.append(questions * cells)
            continue
        out.requests.append(questions * cells)
        if world.fixed[mid] is Verdict.bad:
            bad = mid
        else:
            good = mid
    if bad - good == 1:
        out.named = bad
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bisects", type=int, default=1000)
    parser.add_argument("--builds", type=int, default=64)
    parser.add_argument("--questions", type=int, default=1319)
    parser.add_argument("--cells", type=int, default=2, help="regressed cells each step runs")
    parser.add_argument("--effects", default="0.10,0.20", help="drops at the culprit, drawn uniformly (the targets' scenario)")
    parser.add_argument("--hard-effect", type=float, default=0.05, help="a drop barely beyond the tolerance, shown without a target")
    parser.add_argument("--tolerance", type=float, default=0.03)
    parser.add_argument("--step-alpha", type=float, default=0.02)
    parser.add_argument("--flaky", type=float, default=0.1, help="share of launches that fail")
    parser.add_argument("--seed", type=int, default=27)
    args = parser.parse_args()
    started = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    effects = [float(x) for x in args.effects.split(",")]
    design = Design(args.questions, args.tolerance, args.step_alpha)
    budget = default_budget(args.builds)
    fixed_step = args.questions * args.cells
    print(
        f"{args.bisects} bisects x {args.builds} builds, {args.cells} regressed cells x {args.questions} questions, "
        f"effects {effects}, tolerance {args.tolerance}, step alpha {args.step_alpha}, {args.flaky:.0%} flaky launches, "
        f"budget {budget} launches"
    )
    header = (
        f"{'disc':>6} {'drops':<10} {'search':<12} {'right':>6} {'wrong':>6} {'none':>6} "
        f"{'launch':>7} {'p95':>4} {'after':>6} {'req/step':>9} {'vs fixed':>8}"
    )
    print(header)
    print("-" * len(header))
    failed = []
    scenarios = [(d, tuple(effects), True) for d in (0.036, 0.09)] + [(d, (args.hard_effect,), False) for d in (0.036, 0.09)]
    for discordance, drops, targeted in scenarios:
        rows: dict[str, list[Outcome]] = {"noise-aware": [], "plain": []}
        truth = []
        for _ in range(args.bisects):
            world = draw(args.builds, args.cells, float(rng.choice(drops)), discordance, design, 0.05, rng)
            truth.append(world.culprit)
            rows["noise-aware"].append(noise_aware(world, args.flaky, args.step_alpha, budget, rng))
            rows["plain"].append(plain(world, args.flaky, budget, rng, args.questions, args.cells))
        for name, outcomes in rows.items():
            right = np.mean([o.named == t for o, t in zip(outcomes, truth)])
            wrong = np.mean([o.named is not None and o.named != t for o, t in zip(outcomes, truth)])
            launches = np.array([o.launches for o in outcomes])
            per_step = np.mean([r for o in outcomes for r in o.requests])
            print(
                f"{discordance:>6} {','.join(map(str, drops)):<10} {name:<12} {right:>6.1%} {wrong:>6.1%} "
                f"{1 - right - wrong:>6.1%} {launches.mean():>7.2f} "
                f"{np.percentile(launches, 95):>4.0f} {launches.mean() - 2:>6.2f} {per_step:>9.0f} {per_step / fixed_step:>8.1%}"
            )
            if targeted and name == "noise-aware" and right < TARGET_FOUND:
                failed.append(f"culprit named in {right:.1%} < {TARGET_FOUND:.0%} at discordance {discordance}")
    print()
    print(f"drops {args.hard_effect}: barely beyond the tolerance, the gate's own marginal case (no target)")
    print("right/wrong/none: the true culprit named / another build named / none (inconclusive, not reproduced, budget);")
    print(
        f"launch: launches per bisect (mean), p95 its 95th percentile, after: mean after the 2 endpoints "
        f"(log2 n = {math.log2(args.builds):.0f});"
    )
    print(f"req/step: requests per step launch, vs fixed: against a fixed-n step ({fixed_step} requests)")
    print(f"{time.perf_counter() - started:.0f} s")
    for line in failed:
        print(f"TARGET MISSED: {line}")
    if not failed:
        print(
            f"target met: the noise-aware search names the culprit in >= {TARGET_FOUND:.0%} "
            f"of bisects at drops {effects}, both discordances"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
