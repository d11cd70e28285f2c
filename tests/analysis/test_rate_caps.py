"""The error and invalid-answer caps: what a few answers can and cannot prove, and pending requests."""

from __future__ import annotations

import pytest
from frames import sample_frame

from evalctl.analysis.checks.rates import cap_status, rate_checks
from evalctl.analysis.gate_policy import GatePolicy


@pytest.mark.parametrize(
    ("count", "total", "status"),
    [
        (0, 1, "pass"),
        (1, 1, "inconclusive"),  # one answer of one: 100%, but 1 of 30 would be within a 10% cap
        (3, 3, "inconclusive"),  # 3 of 30 is exactly the cap
        (4, 4, "regression"),  # already more than 30 answers could hold
        (3, 30, "pass"),
        (4, 30, "regression"),
        (4, 40, "pass"),
        (5, 40, "regression"),
        (0, 0, "inconclusive"),
    ],
)
def test_a_cap_regresses_only_when_min_n_answers_could_not_hold_the_count(count, total, status):
    assert cap_status(count, total, limit=0.10, min_n=30) == status


def test_every_count_below_min_n_agrees_with_filling_the_cell_with_good_answers():
    """Regression below min_n exactly when the cell stays over the cap after min_n - total good answers."""
    for total in range(1, 30):
        for count in range(total + 1):
            status = cap_status(count, total, limit=0.10, min_n=30)
            if status == "regression":
                assert count > 0.10 * 30
            elif count > 0.10 * total:
                assert status == "inconclusive" and count <= 0.10 * 30


def test_a_retryable_error_in_an_unfinished_run_is_pending_not_failed():
    rows = [{"doc_id": i} for i in range(40)] + [{"doc_id": 40, "error": "server went away", "error_kind": "connection", "response": None}]
    df = sample_frame(rows)
    finished = {c.kind: c for c in rate_checks(df, GatePolicy(max_error_rate=0.0, metric="strict"), finished=True)}
    unfinished = {c.kind: c for c in rate_checks(df, GatePolicy(max_error_rate=0.0, metric="strict"), finished=False)}
    assert (finished["error_rate"].status, finished["error_rate"].n) == ("regression", 41)
    assert (unfinished["error_rate"].status, unfinished["error_rate"].n) == ("pass", 40)
    assert "1 pending (run not finished)" in unfinished["error_rate"].reason
