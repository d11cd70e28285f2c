import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar
from scipy.stats import norm

from evalctl.analysis.drop_rule import drop_bounds, p_within_tolerance
from evalctl.analysis.intervals import skew_corrected_score

Z_A = norm.ppf(0.95)  # 1.6448536...


def upper(b: int, c: int, n: int, alpha: float = 0.05) -> float:
    """The upper end of the interval the gate (and the paired table) prints: the pass test inverted."""
    return float(drop_bounds(b, c, n, alpha)[1])


def excludes(b: int, c: int, n: int, tolerated_drop: float, alpha: float = 0.05) -> bool:
    """The gate's pass rule for one cell: the data rule out a drop of `tolerated_drop` or more."""
    return bool(p_within_tolerance(b, c, n, tolerated_drop) <= alpha)


# --- the pass rule (drop_rule.p_within_tolerance) / Tango score -------------------------------------------


def test_small_run_with_big_drop_is_not_a_pass():
    # 10 questions, 20-point drop (2 right->wrong flips, none back).
    assert not excludes(2, 0, 10, tolerated_drop=0.05)
    assert not excludes(2, 0, 10, tolerated_drop=0.20)
    # Even zero flips on 10 questions cannot exclude a 5-point drop: the bound is at least
    # plain Tango's z^2 / (n + z^2) = 2.7055 / 12.7055 = 0.2129 (corrections only widen it).
    assert not excludes(0, 0, 10, tolerated_drop=0.05)
    assert upper(0, 0, 10) >= Z_A**2 / (10 + Z_A**2)


def test_large_run_with_balanced_flips_passes():
    # 200 questions, 2 flips each way, tolerated 5 points. By hand:
    # A = 400, B = -4 + 400*0.05 = 16, C = -2*0.05*0.95 = -0.095,
    # p_c = (-16 + sqrt(256 + 152)) / 800 = 0.005249,
    # Z = (0 - 10) / sqrt(200 * (0.010498 + 0.0475)) = -2.936 < -1.645.
    assert skew_corrected_score(2, 2, 200, 0.05, skew=False) == pytest.approx(-2.936, abs=1e-3)
    assert excludes(2, 2, 200, tolerated_drop=0.05)
    assert upper(2, 2, 200) < 0.05
    # ...but not at a 1-point tolerance.
    assert not excludes(2, 2, 200, tolerated_drop=0.01)


def test_churn_does_not_block_a_pass_on_a_large_run():
    # Nondeterministic serving: 100 flips each way on GSM8K. The net drop is 0
    # and the bound (~1.8 points) is far below 5; a bound on b alone would not be.
    assert excludes(100, 100, 1319, tolerated_drop=0.05)
    assert not excludes(100, 100, 1319, tolerated_drop=0.01)


def test_real_regression_cannot_be_excluded():
    # 94% -> 20%: hundreds of right->wrong flips.
    assert not excludes(980, 5, 1319, tolerated_drop=0.05)
    assert upper(980, 5, 1319) > (980 - 5) / 1319


def test_tango_reduces_to_mcnemar_at_zero():
    # At delta0 = 0 the constrained p_c is (b + c) / (2n) and Z = (b - c) / sqrt(b + c).
    for b, c, n in [(30, 4, 1319), (1, 9, 10), (7, 7, 50)]:
        assert skew_corrected_score(b, c, n, 0.0, skew=False) == pytest.approx((b - c) / math.sqrt(b + c))


@pytest.mark.parametrize("b,c,n,delta0", [(2, 0, 10, 0.05), (30, 4, 1319, 0.01), (3, 9, 40, -0.1), (5, 1, 20, 0.4)])
def test_tango_constrained_mle_matches_numeric(b, c, n, delta0):
    # Maximise the multinomial likelihood with p_b = p_c + delta0 numerically and
    # compare the implied Z with the closed-form one.
    def neg_loglik(pc):
        pb = pc + delta0
        rest = 1 - pb - pc
        return -(b * math.log(pb) + c * math.log(pc) + (n - b - c) * math.log(rest))

    lo = max(0.0, -delta0) + 1e-12
    hi = (1 - delta0) / 2 - 1e-12
    pc = minimize_scalar(neg_loglik, bounds=(lo, hi), method="bounded", options={"xatol": 1e-12}).x
    z = (b - c - n * delta0) / math.sqrt(n * (2 * pc + delta0 * (1 - delta0)))
    assert skew_corrected_score(b, c, n, delta0, skew=False) == pytest.approx(z, abs=1e-5)


@settings(max_examples=200, deadline=None)
@given(
    data=st.tuples(st.integers(0, 300), st.integers(0, 300), st.integers(0, 2000)),
    tol=st.floats(min_value=0.0, max_value=0.5),
)
def test_exclusion_agrees_with_upper_bound(data, tol):
    b, c, extra = data
    n = b + c + extra
    assume(n > 0)
    u = upper(b, c, n)
    assert u >= (b - c) / n - 1e-12
    assert u <= 1.0
    assume(abs(u - tol) > 1e-6)
    assert excludes(b, c, n, tol) == (u < tol)


def test_upper_bound_shrinks_with_n_and_grows_with_confidence():
    bounds = [upper(2, 2, n) for n in (20, 50, 200, 1000)]
    assert all(a > b for a, b in zip(bounds, bounds[1:]))
    assert upper(2, 2, 200, alpha=0.01) > upper(2, 2, 200, alpha=0.05)
    assert upper(10, 0, 10) == pytest.approx(1.0)
