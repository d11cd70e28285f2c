"""The culprit posterior and the choice of the next build (bisect.search), on hand-checked cases."""

from __future__ import annotations

import numpy as np
import pytest

from evalctl.bisect.search import (
    Find,
    Next,
    Observation,
    Verdict,
    answer,
    choose,
    default_budget,
    groups,
    posterior,
    search_order,
    step_tolerance,
)

G, B, U, S = Verdict.good, Verdict.bad, Verdict.unknown, Verdict.skipped


def obs(*pairs):
    return [Observation(i, v) for i, v in pairs]


def test_uniform_prior_over_the_builds_after_the_good_one():
    p = posterior(5, [], 0.02)
    assert p[0] == 0 and np.allclose(p[1:], 0.25)


def test_a_bad_and_a_good_step_put_the_mass_between_them_by_the_error_odds():
    p = posterior(9, obs((4, G), (5, B)), 0.02)
    assert p.argmax() == 5
    # C = 6: only the step at 5 disagrees (odds 0.02 / 0.98); C = 4: only the step at 4 disagrees.
    assert p[6] / p[5] == pytest.approx(0.02 / 0.98) and p[4] / p[5] == pytest.approx(0.02 / 0.98)


def test_unknown_and_skipped_steps_carry_no_information():
    assert np.allclose(posterior(9, obs((3, U), (6, S)), 0.02), posterior(9, [], 0.02))


def test_the_next_build_is_the_posterior_median_and_a_decided_build_is_not_tested_again():
    assert choose(17, obs((16, B)), set(), 0.02).build == 8
    nxt = choose(17, obs((16, B), (8, G)), set(), 0.02)
    assert nxt.build in (12, 13) and nxt.culprit.probability < 0.95
    assert choose(17, obs((16, B), (8, G), (12, B)), set(), 0.02).build == 10


def test_stops_at_the_target_and_names_the_culprit():
    # 9 and 10 are told apart from 11 only by the step at 10 so far: not yet.
    almost = choose(17, obs((16, B), (8, G), (12, B), (10, G), (11, B)), set(), 0.02)
    assert almost.build == 9 and almost.culprit.builds == [11] and 0.9 < almost.culprit.probability < 0.95
    done = choose(17, obs((16, B), (8, G), (12, B), (10, G), (11, B), (9, G)), set(), 0.02)
    assert done.build is None and done.culprit.builds == [11] and done.culprit.probability >= 0.95


def test_a_step_that_contradicts_the_others_keeps_the_search_going():
    # 12 said good although 10 said bad: one of them erred, so no build reaches the target yet.
    nxt = choose(17, obs((16, B), (8, G), (10, B), (12, G)), set(), 0.02)
    assert nxt.build is not None and nxt.culprit.probability < 0.95


def test_a_build_that_failed_is_never_tested_and_is_named_only_with_the_build_after_it():
    nxt = choose(17, obs((16, B)), {8}, 0.02)
    assert nxt.build in (7, 9)
    assert groups(6, {2, 3}) == [[1], [2, 3, 4], [5]]
    # Culprit at 3 with 2 broken: the posterior can only say "2 or 3".
    done = choose(6, obs((5, B), (1, G), (3, B)), {2}, 0.02)
    assert done.culprit.builds == [2, 3]


def test_failed_launches_are_retried_before_a_build_counts_as_untestable():
    first = choose(17, obs((16, B), (8, S)), set(), 0.02)
    assert first.build == 8  # tried again
    third = choose(17, obs((16, B), (8, S), (8, S), (8, S)), set(), 0.02)
    assert third.build != 8


def test_step_tolerance_is_half_the_endpoint_drop_never_below_the_gates():
    assert step_tolerance(0.03, 0, 0, 0) == 0.03
    assert step_tolerance(0.03, 2, 1, 1000) == 0.03
    assert 0.08 < step_tolerance(0.03, 220, 20, 1000) < 0.1  # drop 0.2, lower bound ~0.17
    assert default_budget(65) == 2 + 12 + 4


def bisect_noiselessly(truly_bad, builds: int, failed: frozenset = frozenset()) -> Next:
    """Run the search to its end, each step answered by `truly_bad(i)` (search order), as the session does."""
    seen = obs((builds - 1, B))
    while (nxt := choose(builds, seen, set(failed), 0.02)).build is not None:
        i = nxt.build
        seen.append(Observation(i, S if i in failed else B if truly_bad(i) else G))
    return nxt


@pytest.mark.parametrize("fixed_in", [1, 4, 6, 9])
def test_a_fix_is_named_as_the_first_good_build_searching_newest_first(fixed_in):
    releases = list(range(10))  # oldest first; releases >= fixed_in have the fix
    order = search_order(releases, Find.fix)
    assert order == releases[::-1]  # the reference (search index 0) is the newest, fixed one
    done = bisect_noiselessly(lambda i: order[i] < fixed_in, len(order))
    named = answer(done.culprit.builds, Find.fix)
    assert done.culprit.probability >= 0.95 and [order[i] for i in named] == [fixed_in]
    # The same releases bisected for a regression that came in with `fixed_in` name the same release.
    regression = bisect_noiselessly(lambda i: releases[i] >= fixed_in, len(releases))
    assert [releases[i] for i in answer(regression.culprit.builds, Find.regression)] == [fixed_in]


def test_a_fix_next_to_a_build_that_failed_is_named_with_it():
    releases = list(range(8))  # the fix came in release 5, which does not install: 5 or 6 is all a search can say
    order = search_order(releases, Find.fix)
    done = bisect_noiselessly(lambda i: order[i] < 5, len(order), failed=frozenset({order.index(5)}))
    assert sorted(order[i] for i in answer(done.culprit.builds, Find.fix)) == [5, 6]
