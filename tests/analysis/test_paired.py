import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

from evalctl.analysis.pairing import mcnemar_p

counts = st.integers(min_value=0, max_value=500)


@settings(max_examples=300, deadline=None)
@given(b=counts, c=counts, alternative=st.sampled_from(["two-sided", "greater", "less"]))
def test_matches_scipy_binomtest(b, c, alternative):
    p = mcnemar_p(b, c, alternative)
    assert 0.0 <= p <= 1.0
    if b + c == 0:
        assert p == 1.0
    else:
        assert p == pytest.approx(binomtest(b, b + c, 0.5, alternative=alternative).pvalue, abs=1e-12, rel=0)


@settings(max_examples=200, deadline=None)
@given(b=counts, c=counts)
def test_two_sided_symmetric_and_one_sided_mirror(b, c):
    assert mcnemar_p(b, c) == mcnemar_p(c, b)
    # Swapping the runs turns "candidate worse" into "candidate better".
    assert mcnemar_p(b, c, "greater") == pytest.approx(mcnemar_p(c, b, "less"), abs=1e-12)


def test_textbook_cases():
    # b=1, c=9, n=10: P(X<=1) = (C(10,0) + C(10,1)) / 2^10 = 11/1024; doubled = 22/1024.
    assert mcnemar_p(1, 9) == pytest.approx(0.021484375, abs=1e-15)
    # b=0, c=5: P(X<=0) = 1/32; doubled = 2/32 = 0.0625.
    assert mcnemar_p(0, 5) == pytest.approx(0.0625, abs=1e-15)
    # b=5, c=0 one-sided regression: P(X>=5 | n=5) = 1/32.
    assert mcnemar_p(5, 0, "greater") == pytest.approx(1 / 32, abs=1e-15)
    # ...and the opposite direction is certain: P(X<=5 | n=5) = 1.
    assert mcnemar_p(5, 0, "less") == pytest.approx(1.0, abs=1e-15)
    # b=8, c=2, one-sided: P(X>=8 | n=10) = (45 + 10 + 1)/1024 = 56/1024.
    assert mcnemar_p(8, 2, "greater") == pytest.approx(56 / 1024, abs=1e-15)
    # Ties are no evidence: two-sided p is capped at 1.
    assert mcnemar_p(7, 7) == 1.0


def test_no_discordant_pairs():
    assert all(mcnemar_p(0, 0, alt) == 1.0 for alt in ("two-sided", "greater", "less"))


@pytest.mark.parametrize("args", [(-1, 2), (1, -2), (1, 2, "sideways")])
def test_rejects_bad_input(args):
    with pytest.raises(ValueError):
        mcnemar_p(*args)
