"""The accuracy rule's numerics: the printed interval is the deciding tests' inversion, and
the worst cases the exact enumeration (scripts/exact_gate.py) reports hold on spot checks."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from evalctl.analysis.drop_rule import beyond_score, decide_drops, drop_bounds, p_beyond_tolerance, p_within_tolerance, within_score
from evalctl.analysis.intervals import skew_corrected_score

# The enumeration lives in the script the guarantee is checked with; load it by path.
_spec = importlib.util.spec_from_file_location("exact_gate", Path(__file__).resolve().parents[2] / "scripts" / "exact_gate.py")
exact_gate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(exact_gate)
RULES, Scan = exact_gate.RULES, exact_gate.Scan

TOL, ALPHA = 0.03, 0.05


def every_count(n: int) -> tuple[np.ndarray, np.ndarray]:
    b, c = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    keep = b + c <= n
    return b[keep].astype(float), c[keep].astype(float)


@pytest.mark.parametrize("n", [30, 100, 257])
def test_the_interval_and_the_tests_agree_on_every_count(n):
    b, c = every_count(n)
    lower, upper = drop_bounds(b, c, np.full(b.shape, n), ALPHA)
    beyond = p_beyond_tolerance(b, c, n, TOL) <= ALPHA
    within = p_within_tolerance(b, c, n, TOL) <= ALPHA
    assert ((lower > TOL) == beyond).all()
    assert ((upper < TOL) == within).all()
    assert (lower <= upper).all()


def test_the_audits_case_no_longer_disagrees():
    # n=100, 6 right->wrong, none back: Tango's bound was 0.031 > tol while its p was 0.078.
    lower, _ = drop_bounds(6, 0, 100, ALPHA)
    assert (lower > TOL) == (p_beyond_tolerance(6, 0, 100, TOL) <= ALPHA)
    assert float(lower) < TOL


@pytest.mark.parametrize("n", [30, 200])
def test_the_scores_fall_with_the_null_drop_where_they_are_inverted(n):
    # The inversion relies on it: each z* decreases in delta0 on the side its test rejects
    # (beyond-score >= z, within-score <= -z, any alpha < 0.5); far on the other side, past
    # the expansion's vertex, it may turn (seen below -1.59 and above 1.01).
    b, c = every_count(n)
    grid = np.linspace(-0.999, 0.999, 999)
    for score, sign in ((beyond_score, 1), (within_score, -1)):
        s = score(b[:, None], c[:, None], n, grid[None, :])
        relevant = np.minimum(sign * s[:, 1:], sign * s[:, :-1]) > -1.0
        assert (np.diff(s, axis=1)[relevant] <= 1e-12).all()


def test_skew_correction_vanishes_without_skew():
    # At delta0 = 0 the third cumulant is 0: the statistic is Tango's (McNemar's z).
    assert beyond_score(30, 10, 500, 0.0) == pytest.approx(skew_corrected_score(30, 10, 500, 0.0, continuity=0.75, skew=False))


def test_exact_sizes_where_the_rule_before_failed():
    # The audit's cases, exactly: one-way flips at n = 400 (13 cells) and 0.01 discordance at n = 300.
    args = argparse.Namespace(alpha=ALPHA, tolerance=TOL, cells=20)
    grid = np.array([0.0, 0.005])
    before, now = (Scan(*RULES[name], args, grid) for name in ("before", "now"))
    assert before.rates(400, 0.0)[0] > ALPHA  # 20 cells, any dependence
    for n, p_c in ((400, 0.0), (300, 0.005), (1319, 0.0), (200, 0.0)):
        fwer, _, independent, false_pass = now.rates(n, p_c)
        assert fwer <= ALPHA and independent <= ALPHA and false_pass <= ALPHA


def test_decisions_unchanged_in_shape():
    decided = decide_drops([120, 10, 3], [5, 10, 3], [1319, 1319, 20], TOL, ALPHA, min_n=30)
    assert list(decided.status) == ["regression", "pass", "inconclusive"]
    assert int(decided.tests) == 2
