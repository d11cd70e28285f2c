from __future__ import annotations

import math

import pytest
from frames import sample_frame

from evalctl.analysis.accuracy import accuracy_by_length, accuracy_table
from evalctl.analysis.throughput import throughput_table


def test_accuracy_counts_errors_and_invalid_apart_from_wrong():
    df = sample_frame(
        [
            {"doc_id": 0},
            {"doc_id": 1, "strict_correct": False, "flexible_correct": False, "strict_answer": "2"},
            {"doc_id": 2, "strict_correct": False, "flexible_correct": True, "strict_answer": None},
            {
                "doc_id": 3,
                "error": "HTTP 400: too long",
                "error_kind": "http_4xx",
                "strict_correct": None,
                "flexible_correct": None,
                "strict_answer": None,
            },
        ]
    )
    row = accuracy_table(df).iloc[0]
    assert (row.n, row.errors, row.invalid) == (3, 1, 1)
    assert row.strict_acc == pytest.approx(1 / 3)
    assert row.flexible_acc == pytest.approx(2 / 3)
    assert row.strict_lo < row.strict_acc < row.strict_hi


def test_accuracy_groups_by_cell():
    df = sample_frame(
        [{"cache": c, "shots": s, "doc_id": d, "strict_correct": c == "off"} for c in ("on", "off") for s in (1, 2) for d in range(5)]
    )
    table = accuracy_table(df)
    assert len(table) == 4
    assert set(table[table.cache == "off"].strict_acc) == {1.0}
    assert set(table[table.cache == "on"].strict_acc) == {0.0}
    assert (table.n == 5).all()


def test_length_bins_cover_every_row_and_split_on_length():
    rows = [{"doc_id": i, "prompt_tokens": 100 + 50 * i, "strict_correct": i < 5} for i in range(10)]
    table = accuracy_by_length(sample_frame(rows), n_bins=2)
    assert table.n.sum() == 10
    assert len(table) == 2
    short, long = table.sort_values("bin_lo").strict_acc
    assert short == 1.0 and long == 0.0


def test_throughput_rates_and_cache_hit_ratio():
    rows = [
        {"doc_id": i, "started_at": float(i), "latency_s": 2.0, "completion_tokens": 10, "prompt_tokens": 100, "cached_tokens": 50}
        for i in range(4)
    ]
    row = throughput_table(sample_frame(rows)).iloc[0]
    assert row.wall_s == pytest.approx(5.0)  # first start 0, last end 3 + 2
    assert row.requests_per_s == pytest.approx(4 / 5)
    assert row.output_tokens_per_s == pytest.approx(40 / 5)
    assert row.cache_hit_ratio == pytest.approx(0.5)
    assert row.latency_p50_s == pytest.approx(2.0)


def test_throughput_of_all_error_cell_is_nan_not_crash():
    rows = [{"error": "boom", "error_kind": "connection", "completion_tokens": None, "prompt_tokens": None, "cached_tokens": None}]
    row = throughput_table(sample_frame(rows)).iloc[0]
    assert row.requests == 1
    assert row.requests_per_s == 0.0
    assert math.isnan(row.cache_hit_ratio)


def test_invalid_counts_follow_the_metric_the_gate_judges():
    from evalctl.analysis.checks.rates import rate_checks
    from evalctl.analysis.gate import GatePolicy
    from evalctl.analysis.summary import summarize

    df = sample_frame([{"doc_id": 0, "strict_answer": None, "strict_correct": False}, {"doc_id": 1}])  # no "#### N", a number though
    for metric, invalid in (("strict", 1), ("flexible", 0)):
        summary = summarize(df, metric)
        (check,) = [c for c in rate_checks(df, GatePolicy(metric=metric)) if c.kind == "invalid_rate"]
        assert summary.accuracy["invalid"].iloc[0] == summary.by_length["invalid"].sum() == round(check.value * check.n) == invalid
