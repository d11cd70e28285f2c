from __future__ import annotations

import pytest
from frames import sweep_frame

from evalctl.analysis.pairing import within_run
from evalctl.analysis.throughput import throughput_table
from evalctl.analysis.throughput_checks import throughput_ratios


def test_ratios_per_cell_with_slowdown_for_rates_and_latencies():
    df = sweep_frame(n=20, shots=(8,))
    on = df["cache"] == "on"
    df.loc[on, "latency_s"] = 2.0  # cache on: every request twice as slow
    df.loc[on, "started_at"] = df.loc[on, "started_at"].min() + (df.loc[on, "started_at"] - df.loc[on, "started_at"].min()) * 2
    table = throughput_ratios(within_run(throughput_table(df))).set_index("measure")
    assert table.loc["latency_p50_s", "ratio"] == pytest.approx(2.0)
    assert table.loc["latency_p50_s", "slowdown"] == pytest.approx(0.5)
    assert table.loc["requests_per_s", "ratio"] == pytest.approx(0.5)
    assert table.loc["requests_per_s", "slowdown"] == pytest.approx(0.5)
    assert (table["cache"] == "on").all() and (table["reference"] == "cache off").all()
    assert "ttft_p50_s" not in table.index  # not streamed: no TTFT to compare
