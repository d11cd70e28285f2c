import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

from evalctl.analysis.paired import McNemarResult, mcnemar_exact, paired_flips

counts = st.integers(min_value=0, max_value=500)


@settings(max_examples=300, deadline=None)
@given(b=counts, c=counts, alternative=st.sampled_from(["two-sided", "greater", "less"]))
def test_matches_scipy_binomtest(b, c, alternative):
    r = mcnemar_exact(b, c, alternative)
    assert 0.0 <= r.p_value <= 1.0
    if b + c == 0:
        assert r.p_value == 1.0
    else:
        ref = binomtest(b, b + c, 0.5, alternative=alternative).pvalue
        assert r.p_value == pytest.approx(ref, abs=1e-12, rel=0)


@settings(max_examples=200, deadline=None)
@given(b=counts, c=counts)
def test_two_sided_symmetric_and_one_sided_mirror(b, c):
    assert mcnemar_exact(b, c).p_value == mcnemar_exact(c, b).p_value
    # Swapping the runs turns "candidate worse" into "candidate better".
    assert mcnemar_exact(b, c, "greater").p_value == pytest.approx(mcnemar_exact(c, b, "less").p_value, abs=1e-12)


def test_textbook_cases():
    # b=1, c=9, n=10: P(X<=1) = (C(10,0) + C(10,1)) / 2^10 = 11/1024; doubled = 22/1024.
    assert mcnemar_exact(1, 9).p_value == pytest.approx(0.021484375, abs=1e-15)
    # b=0, c=5: P(X<=0) = 1/32; doubled = 2/32 = 0.0625.
    assert mcnemar_exact(0, 5).p_value == pytest.approx(0.0625, abs=1e-15)
    # b=5, c=0 one-sided regression: P(X>=5 | n=5) = 1/32.
    assert mcnemar_exact(5, 0, "greater").p_value == pytest.approx(1 / 32, abs=1e-15)
    # ...and the opposite direction is certain: P(X<=5 | n=5) = 1.
    assert mcnemar_exact(5, 0, "less").p_value == pytest.approx(1.0, abs=1e-15)
    # b=8, c=2, one-sided: P(X>=8 | n=10) = (45 + 10 + 1)/1024 = 56/1024.
    assert mcnemar_exact(8, 2, "greater").p_value == pytest.approx(56 / 1024, abs=1e-15)
    # Ties are no evidence: two-sided p is capped at 1.
    assert mcnemar_exact(7, 7).p_value == 1.0


def test_no_discordant_pairs():
    for alt in ("two-sided", "greater", "less"):
        r = mcnemar_exact(0, 0, alt)
        assert r.p_value == 1.0
        assert r.n_discordant == 0


def test_result_fields_and_delta():
    r = mcnemar_exact(30, 4, "greater", n_pairs=1319)
    assert isinstance(r, McNemarResult)
    assert (r.b, r.c, r.n_discordant, r.n_pairs, r.alternative) == (30, 4, 34, 1319, "greater")
    assert r.accuracy_delta == pytest.approx((4 - 30) / 1319)
    assert r.p_value < 1e-4
    with pytest.raises(AttributeError):
        r.p_value = 0.5  # frozen
    assert mcnemar_exact(3, 1).accuracy_delta is None
    assert math.isnan(mcnemar_exact(0, 0, n_pairs=0).accuracy_delta)


@pytest.mark.parametrize(
    "args",
    [(-1, 2), (1.5, 2), (1, 2, "sideways"), (5, 5, "greater", 9)],
)
def test_rejects_bad_input(args):
    with pytest.raises(ValueError):
        mcnemar_exact(*args)


def test_paired_flips_counts():
    ref = [True, True, True, False, False, True, False]
    cand = [True, False, True, True, False, False, False]
    assert paired_flips(ref, cand) == (2, 2, 1, 2)
    # 0/1 arrays and numpy bools agree with Python bools.
    assert paired_flips(np.array(ref, dtype=int), np.array(cand, dtype=float)) == (2, 2, 1, 2)
    assert paired_flips([], []) == (0, 0, 0, 0)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans()), max_size=200))
def test_paired_flips_partition(pairs):
    ref = [p[0] for p in pairs]
    cand = [p[1] for p in pairs]
    both_right, b, c, both_wrong = paired_flips(ref, cand)
    assert both_right + b + c + both_wrong == len(pairs)
    # Accuracy difference is exactly the flip imbalance.
    assert sum(cand) - sum(ref) == c - b


@pytest.mark.parametrize(
    "ref, cand",
    [([True, False], [True]), ([1, 2], [1, 0]), ([0.5, 1], [1, 1]), ([[True]], [[True]])],
)
def test_paired_flips_rejects(ref, cand):
    with pytest.raises(ValueError):
        paired_flips(ref, cand)
