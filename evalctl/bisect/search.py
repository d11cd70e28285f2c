"""The noise-aware search: a posterior over which build is the culprit, and the next build to test.

Builds 0..m-1 are in commit order: 0 the known-good endpoint (the reference), m-1 the bad one. The
culprit C is the first bad build, C in 1..m-1, uniform a priori. A step on build i says *bad* (its
regressed cells regress against the reference), *good* (they pass), *unknown* (the sequential rule
ran out of questions) or *skipped* (the build or its launch failed).

**Model.** Build i is truly bad iff i >= C (one culprit; its regression persists). A decided step
errs (good called bad, or bad called good) with probability at most `error`, independently of the
other steps given C. Unknown and skipped steps carry no information about C (a launch fails, or a
cell runs out of questions, for reasons of its own). The posterior is then

    P(C = j | data)  proportional to  prod_t  (1 - error) if v_t agrees with "i_t >= j", else error,

over the decided steps (i_t, v_t): probabilistic bisection (Horstein 1963, "Sequential transmission
using noiseless feedback", IEEE Trans. Inf. Theory; Waeber, Frazier & Henderson 2013, "Bisection search
with noisy responses", SIAM J. Control Optim.), on a finite set as in Google's flake-aware culprit
finding (Henderson et al., ICST 2023, "Flake Aware Culprit Finding") and git-bayesect.

**Next test.** The testable build i whose P(C <= i) is nearest 1/2 (the posterior median): with
symmetric errors it maximises the expected information of the verdict (Horstein's rule). Each build
gets at most one decided step: on a deterministic engine a second launch repeats its answers, which
would break the independence above. A build that failed to build, or to launch twice, is untestable
and cannot be told from the build after it, so the two are reported together (as `git bisect skip`
does); a skipped build is never called bad.

**The steps' question.** Which endpoint does the build resemble? The bad endpoint is judged at the
gate's tolerance (does the regression reproduce?); later steps, with the same sequential rule, at
`step_tolerance`: half the bad endpoint's drop (its 95% lower bound, pooled over the regressed
cells), never less than the gate's. Builds without the culprit (drop near 0) and with it (near the
endpoint's) then sit each half the regression away, so both verdicts come fast; with a regression
barely beyond the gate's tolerance it is the gate's own question.

**A fix.** `--find fix` takes the builds newest first: the reference is the newest (fixed, good),
the bad endpoint the oldest (buggy), and the first bad build in that order is the newest one still
buggy; the fix is the build after it in release order (`answer`). Same model and guarantee, with
"persists" read backwards: every build before the fix is buggy.

**Stopping and the guarantee.** Testing stops when one culprit (with the untestable builds just
before it) holds posterior probability >= `target` (0.95), when the launch budget is spent, or when
no build is left whose test could move the posterior. Under the model with a uniform prior, a culprit
named at posterior >= target is wrong with probability <= 1 - target (averaged over culprit
positions): the stopping rule reads only the posterior. **Assumptions**: one culprit and a persistent
regression; per-step errors <= `error` and independent given C; unknown and skipped outcomes
independent of C. `error` is the steps' alpha: the sequential rule (analysis/sequential.py) bounds
its false-regression and false-pass rates by alpha at the worst case, a drop exactly at the
tolerance; at realistic drops errors are far rarer, so the posterior is conservative. For `target`
to be reachable when the culprit's neighbours are each tested once, error/(1 - error) must be below
(1 - target)/(2 target), about 0.026 at 0.95: hence the default `--step-alpha` 0.02.
`scripts/bench_bisect.py` measures the culprit-found rate and the launches beside plain bisection,
with step verdicts drawn from the real sequential rule.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TypeVar

import numpy as np

from evalctl.analysis.drop_rule import drop_bounds

TARGET = 0.95
LAUNCH_RETRIES = 2  # failed launches of one build tried again before it counts as untestable


class Verdict(str, Enum):
    good = "good"
    bad = "bad"
    unknown = "unknown"
    skipped = "skipped"


class Find(str, Enum):
    """The change a bisect names, its builds given oldest first: the first bad one after good ones, or the first good one after bad ones."""

    regression = "regression"
    fix = "fix"


T = TypeVar("T")


def search_order(builds: Sequence[T], find: Find) -> list[T]:
    """Builds (given oldest first) in the order the search takes them, the good end first: newest first for a fix."""
    return list(builds) if find is Find.regression else list(reversed(builds))


def answer(culprit: list[int], find: Find) -> list[int]:
    """The builds (search order) a bisect names for the search's culprit: itself for a regression; for a fix, the build
    before it in search order, i.e. the first fixed one in release order (with the untestable ones it cannot be told from)."""
    return list(culprit) if find is Find.regression else [i - 1 for i in culprit]


@dataclass(frozen=True)
class Observation:
    build: int  # index in commit order, 0 = the good endpoint
    verdict: Verdict


def posterior(builds: int, observations: list[Observation], error: float) -> np.ndarray:
    """P(C = j) for j in 0..builds-1 (0 for j = 0, the good endpoint), given the observations."""
    if builds < 2 or not 0 < error < 0.5:
        raise ValueError(f"need >= 2 builds and 0 < error < 0.5, got {builds}, {error}")
    log = np.zeros(builds)
    log[0] = -np.inf
    j = np.arange(builds)
    right, wrong = np.log1p(-error), np.log(error)
    for obs in observations:
        if obs.verdict not in (Verdict.good, Verdict.bad):
            continue
        bad_if = obs.build >= j  # the build is bad for every culprit at or before it
        agrees = bad_if if obs.verdict is Verdict.bad else ~bad_if
        log += np.where(agrees, right, wrong)
    log -= log.max()
    mass = np.exp(log)
    return mass / mass.sum()


def step_tolerance(tolerance: float, b: int, c: int, n: int) -> float:
    """The tolerance later steps test against: half the bad endpoint's drop (lower 95% bound; flips b, c of n), at least `tolerance`."""
    return max(tolerance, float(drop_bounds(b, c, n, 0.05)[0]) / 2) if n else tolerance


def untestable(observations: list[Observation], failed_builds: set[int]) -> set[int]:
    """Builds no step can judge: a failed build, or more failed launches than `LAUNCH_RETRIES` allows."""
    launches = Counter(obs.build for obs in observations if obs.verdict is Verdict.skipped)
    return set(failed_builds) | {i for i, n in launches.items() if n > LAUNCH_RETRIES}


def groups(builds: int, blocked: set[int]) -> list[list[int]]:
    """Candidates 1..builds-1 as the posterior can tell them apart: each untestable build joins the next one."""
    out, pending = [], []
    for i in range(1, builds):
        pending.append(i)
        if i not in blocked or i == builds - 1:
            out.append(pending)
            pending = []
    return out


@dataclass(frozen=True)
class Culprit:
    builds: list[int]  # the culprit, after the untestable builds it cannot be told apart from
    probability: float


def next_build(probs: np.ndarray, observations: list[Observation], blocked: set[int]) -> int | None:
    """The testable, not yet decided build nearest the posterior median; None if no test can move the posterior."""
    decided = {o.build for o in observations if o.verdict in (Verdict.good, Verdict.bad, Verdict.unknown)}
    below = np.cumsum(probs)  # P(C <= i)
    # Testing i splits {C <= i} from {C > i}; the last build (bad endpoint) splits nothing.
    options = [i for i in range(1, len(probs) - 1) if i not in decided and i not in blocked and 0 < below[i] < 1]
    if not options:
        return None
    return min(options, key=lambda i: (abs(below[i] - 0.5), i))


@dataclass(frozen=True)
class Next:
    """What the search says after the steps so far: test `build`, or stop (build None) with `culprit`."""

    build: int | None
    culprit: Culprit


def choose(builds: int, observations: list[Observation], failed_builds: set[int], error: float, target: float = TARGET) -> Next:
    """The posterior after `observations`, and the next build to test unless a culprit reached `target`. A build left
    unknown is grouped with the next one, as an untestable one is: no later step on it will decide it."""
    probs = posterior(builds, observations, error)
    unknown = {o.build for o in observations if o.verdict is Verdict.unknown}
    blocked = untestable(observations, failed_builds) | unknown
    probability, members = max(((float(probs[g].sum()), g) for g in groups(builds, blocked)), key=lambda x: x[0])
    culprit = Culprit(members, probability)
    if culprit.probability >= target:
        return Next(None, culprit)
    return Next(next_build(probs, observations, blocked), culprit)


def default_budget(builds: int) -> int:
    """Launches a bisect may use by default: both endpoints, twice log2 of the builds, and a few flaky relaunches."""
    return 2 + 2 * int(np.ceil(np.log2(max(builds - 1, 2)))) + 4
