"""Agreement judged against the measured floor: warm-vs-cold disagreement beside cold-vs-cold.

A good build's warm answer can differ from its cold twin now and then (non-batch-invariant
numerics), so a fixed tolerance on warm-vs-cold disagreement either hides a bug or blames a good
build. The A/A arm (`noise: true`) runs each server's cache-off reference cell again, cold, on the
same questions: its disagreement with the first cold run is the floor a good build shows uncached.

The pairs. Every answer is scored by `agreement` against the first cold run R of its server and
question. Question by question (same profile, variant, shots, doc and prompt hash) of a cache-on
cell, W_i = 1 when the warm answer differs from R, A_i = 1 when the cold replica does; b = #{W = 1,
A = 0}, c = #{W = 0, A = 1}, and the excess d = P(W = 1) - P(A = 1) is estimated (b - c) / n.

The rule, margin m = `floor_margin`, is the paired drop rule (`drop_rule`), the replica as reference:
regression when H0 d <= m is rejected one-sided, Holm over one build's floor checks at `alpha` (a
build's verdict is the same alone or beside others); pass when H0 d >= m is rejected in the cell;
inconclusive otherwise, below `min_n` pairs, for a cell with no A/A replica, and without the arm (the
reason says to set `noise: true`). A candidate build's disagreement is also paired with the baseline
build's on the same prompts by this rule at the same margin (`checks.accuracy`, the differential).

Guarantee (exact, `scripts/exact_floor.py`, no simulation): whenever every judged cell of a build
has a true excess of at most m, the chance that any of its floor checks is called a regression is
at most alpha, under any dependence between cells (Holm); over k builds, k alpha; whenever a cell's
excess is at least m, the chance it passes is at most alpha. Shown at alpha 0.05 for m in {0.05,
0.10, 0.15}, every n from 20 to 2,000 and any joint law of (W, A) within a question (worst cases,
power, and why not the conditional McNemar test: docs/statistics.md); other alphas and margins hold
only if the script is run for them.

Assumptions:
- questions are independent draws, each giving one (A, W) pair (turns of one conversation are not:
  judge one turn a conversation, `conversation: {judge: returns, events: 1}`), and n is fixed before
  the answers are seen (a sequential run's floor check judges the pairs there are, at a rate the
  script does not cover);
- under no bug, the warm path disagrees with R at most m more often than a cold re-run does; what
  warm computation adds on a good build (llama.cpp's separate last-tokens batch) the floor does not
  measure: m must cover that.

References: Nam 1997, Biometrics 53:1422; Tango 1998, Stat Med 17:891; Holm 1979, Scand J Stat 6:65;
Berger 1982, Technometrics 24:295 (intersection-union, for the pass side).
"""

from __future__ import annotations

import pandas as pd

from evalctl.agreement import AGREEMENT, with_agreement
from evalctl.analysis.gate_policy import GatePolicy
from evalctl.analysis.pairing import Comparison
from evalctl.schema import CacheMode

# The floor check's findings carry the cache comparison's name: they rest on the same cells (the
# cache-on cell and the cache-off answers it is scored against), so a failed cache label revises them too.
CACHE_COMPARISON = "cache on vs off"
REFERENCE_LABEL = "A/A replica (cold vs cold)"


def replaces_cache_accuracy(policy: GatePolicy) -> bool:
    """Judged by agreement, the cache comparison's fixed-tolerance check asks the floor's question against a floor
    of zero: with the floor on, the floor check judges it instead (the other comparisons keep theirs)."""
    return policy.agreement_floor is not None and policy.metric == AGREEMENT


def floor_comparison(samples: pd.DataFrame, replica: pd.DataFrame) -> Comparison:
    """Each cache-on cell against its server's A/A replica, question by question, both scored by agreement with the first cold run."""
    warm = with_agreement(samples[samples["cache"] == CacheMode.on.value], samples)
    cold_again = with_agreement(replica, samples)
    return Comparison("floor", CACHE_COMPARISON, cold_again, warm, ("profile", "variant", "shots"), REFERENCE_LABEL)
