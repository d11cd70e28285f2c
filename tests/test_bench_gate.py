"""`mde_paired` in scripts/bench_gate.py: the old printed MDE (Connor's closed form) the script compares with
the simulated rule. The script is loaded from its file, as tests/test_scripts.py does."""

import importlib.util
import math
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "bench_gate.py"
_spec = importlib.util.spec_from_file_location("evalctl_script_bench_gate", SCRIPT)
bench_gate = sys.modules.setdefault(_spec.name, importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(bench_gate)  # dataclasses look their module up in sys.modules while the class is made
PairedMDE, mde_paired = bench_gate.PairedMDE, bench_gate.mde_paired

Z_A = norm.ppf(0.95)  # 1.6448536...
Z_B = norm.ppf(0.80)  # 0.8416212...


def connor_n(delta, pd, z_a=Z_A, z_b=Z_B):
    return (z_a * math.sqrt(pd) + z_b * math.sqrt(pd - delta**2)) ** 2 / delta**2


def test_mde_gsm8k_pinned():
    # n=1319 (GSM8K test), pd=0.1, one-sided alpha=0.05 (z_a=1.64485), power 0.8
    # (z_b=0.84162). Closed form:
    #   d = sqrt(pd) (sqrt(n) z_a + z_b sqrt(n + z_b^2 - z_a^2)) / (n + z_b^2)
    #     = 0.316228 * (36.3180*1.644854 + 0.841621*sqrt(1317.0028)) / 1319.7083
    #     = 0.316228 * (59.7379 + 30.5429) / 1319.7083 = 0.021633
    # Cross-check: the cruder (z_a + z_b) sqrt(pd / n) = 2.486475 * 0.0087073
    # = 0.021650, within 0.1 point, as it should be for d^2 << pd.
    r = mde_paired(1319, discordance_rate=0.1, alpha=0.05, power=0.8)
    assert isinstance(r, PairedMDE)
    assert r.mde == pytest.approx(0.021633, abs=2e-6)
    assert (r.n, r.discordance_rate, r.alpha, r.power) == (1319, 0.1, 0.05, 0.8)
    # Plugging the MDE back into Connor's formula returns n.
    assert connor_n(r.mde, 0.1) == pytest.approx(1319, rel=1e-9)


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(min_value=10, max_value=100_000),
    pd=st.floats(min_value=0.01, max_value=1.0),
    power=st.floats(min_value=0.5, max_value=0.99),
    alpha=st.floats(min_value=0.001, max_value=0.2),
)
def test_mde_round_trip(n, pd, power, alpha):
    r = mde_paired(n, pd, alpha, power)
    if math.isinf(r.mde):
        return
    assert 0 < r.mde <= pd
    z_a, z_b = norm.ppf(1 - alpha), norm.ppf(power)
    assert connor_n(r.mde, pd, z_a, z_b) == pytest.approx(n, rel=1e-7)


def test_mde_monotone():
    ns = [50, 100, 200, 500, 1319, 5000, 20000]
    mdes = [mde_paired(n).mde for n in ns]
    assert all(a > b for a, b in zip(mdes, mdes[1:]))
    # More churn between runs needs a bigger effect to stand out.
    assert mde_paired(1319, 0.05).mde < mde_paired(1319, 0.1).mde < mde_paired(1319, 0.3).mde
    # Stricter alpha or higher power cost detectable effect size.
    assert mde_paired(1319, alpha=0.01).mde > mde_paired(1319).mde
    assert mde_paired(1319, power=0.95).mde > mde_paired(1319).mde


def test_mde_undetectable_is_inf():
    # 10 questions, pd=0.1: expected one discordant pair; the formula's d
    # exceeds pd, i.e. no achievable drop would be detected.
    assert mde_paired(10, 0.1).mde == math.inf
    assert mde_paired(1, 0.5).mde == math.inf


def test_input_validation():
    with pytest.raises(ValueError):
        mde_paired(100, power=0.3)
    with pytest.raises(ValueError):
        mde_paired(100, discordance_rate=0)
