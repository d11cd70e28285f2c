"""Requests in flight measured from the records' send and finish times, and shown as a concurrency check's evidence."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from frames import sweep_frame

from evalctl.analysis.checks.accuracy import accuracy_checks
from evalctl.analysis.gate_policy import GatePolicy
from evalctl.analysis.pairing import within_run
from evalctl.analysis.throughput import in_flight, throughput_table


def test_overlaps_are_weighted_by_time_and_back_to_back_requests_never_overlap():
    held = in_flight([0.0, 1.0], [2.0, 3.0])  # 1 in flight for 1 s, 2 for 1 s, 1 for 1 s
    assert (held.mean, held.max) == (pytest.approx(4 / 3), 2)
    assert in_flight([0.0, 1.0, 2.0], [1.0, 2.0, 3.0]) == in_flight([0.0], [3.0])  # one at a time: 1.0, max 1
    assert in_flight([0.0, float("nan")], [1.0, 5.0]).max == 1  # an untimed request is left out
    empty = in_flight([], [])
    assert math.isnan(empty.mean) and empty.max == 0


def test_each_cell_shows_what_it_held_and_a_levels_check_names_both_levels():
    base = sweep_frame(n=30, shots=(8,))  # sent 0.1 s apart, 1 s each: about 10 at once
    one_at_a_time = base.assign(concurrency=1, started_at=[float(i) for i in range(len(base))])
    frame = pd.concat([one_at_a_time, base.assign(concurrency=8)], ignore_index=True)
    table = throughput_table(frame).set_index(["concurrency", "cache"])
    assert table.loc[(1, "on"), "in_flight_max"] == 1 and table.loc[(1, "on"), "in_flight_mean"] == pytest.approx(1.0)
    # 30 requests busy 1 s each over 3.9 s (ramp up and down); at most 10 or 11 at once (sums of 0.1 s steps)
    assert table.loc[(8, "on"), "in_flight_max"] in (10, 11) and table.loc[(8, "on"), "in_flight_mean"] == pytest.approx(30 / 3.9)
    checks = [c for c in accuracy_checks(within_run(frame), GatePolicy()) if c.comparison == "concurrency 8 vs 1"]
    assert len(checks) == 2 and all("vs 1.0 in flight on average (max 1) at concurrency 1" in c.reason for c in checks)
    assert all(c.reason.count("in flight on average") == 2 and "held 7.7 in flight" in c.reason for c in checks)
