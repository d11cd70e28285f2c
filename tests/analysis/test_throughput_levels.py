"""Throughput at each load level: rates, percentiles, goodput under an objective (pure, fast tier)."""

from __future__ import annotations

import math

import numpy as np
import pydantic
import pytest

from evalctl.analysis.checks.throughput import throughput_checks
from evalctl.analysis.gate_policy import GatePolicy
from evalctl.analysis.pairing import between_runs
from evalctl.analysis.throughput import throughput_table
from evalctl.schema import SloConfig
from tests.analysis.frames import sample_frame


def _levels():
    """Four requests one after another at concurrency 1 (1 s each), four at once at 8 (2 s each, from t=10)."""
    one = [dict(doc_id=i, started_at=float(i), latency_s=1.0, ttft_s=0.1, itl_s=0.01) for i in range(4)]
    eight = [dict(doc_id=i, started_at=10.0, latency_s=2.0, ttft_s=0.2 * (i + 1), itl_s=[0.02, 0.06, None, 0.02][i]) for i in range(4)]
    return sample_frame(one + eight).assign(concurrency=[1] * 4 + [8] * 4)


def test_rates_and_percentiles_at_each_level():
    table = throughput_table(_levels()).set_index("concurrency")
    assert table.loc[1, "requests_per_s"] == pytest.approx(1.0)  # 4 requests in 4 s
    assert table.loc[8, "requests_per_s"] == pytest.approx(2.0)  # 4 requests in 2 s
    assert table.loc[8, "output_tokens_per_s"] == pytest.approx(40 / 2)
    assert table.loc[8, "user_tokens_per_s"] == pytest.approx(10 / 2)  # each user saw 10 tokens in 2 s
    assert table.loc[8, "ttft_p50_s"] == pytest.approx(0.5)
    assert table.loc[8, "ttft_p99_s"] == pytest.approx(0.8, abs=0.01)
    assert table.loc[8, "itl_p90_s"] > table.loc[8, "itl_p50_s"] == pytest.approx(0.02)
    assert math.isnan(table.loc[1, "goodput_per_s"])  # no objective stated


def test_goodput_counts_requests_meeting_both_objectives():
    table = throughput_table(_levels(), slo=SloConfig(ttft_ms=500, itl_ms=50)).set_index("concurrency")
    assert table.loc[1, "goodput_per_s"] == pytest.approx(1.0)  # every request met it
    # at 8: TTFT 0.2 (ITL 20 ms) met; 0.4 (ITL 60 ms) missed the ITL; 0.6 and 0.8 missed the TTFT
    assert table.loc[8, "goodput_per_s"] == pytest.approx(1 / 2)
    only_ttft = throughput_table(_levels(), slo=SloConfig(ttft_ms=700)).set_index("concurrency")
    assert only_ttft.loc[8, "goodput_per_s"] == pytest.approx(3 / 2)
    only_itl = throughput_table(_levels(), slo=SloConfig(itl_ms=50)).set_index("concurrency")
    assert only_itl.loc[8, "goodput_per_s"] == pytest.approx(2 / 2)  # as guidellm's: one with no ITL did not show it met it


def test_goodput_unknown_without_streamed_requests():
    frame = sample_frame([dict(doc_id=i, started_at=float(i)) for i in range(3)]).assign(concurrency=1)  # ttft_s None
    row = throughput_table(frame, slo=SloConfig(itl_ms=50)).iloc[0]
    assert math.isnan(row.goodput_per_s)


def test_an_objective_names_a_latency():
    with pytest.raises(pydantic.ValidationError, match="ttft_ms, itl_ms or both"):
        SloConfig()


def test_a_candidate_is_judged_against_its_baseline_at_each_level():
    """The gate's throughput check, unchanged, gives one finding per measure and level: a build slower only under load
    is a regression at 8 in flight and a pass at 1."""
    rng = np.random.default_rng(4)

    def run(run_id: str, slow_at_8: float):
        rows = [dict(doc_id=i, prompt_hash=f"h{i}", started_at=float(i)) for _ in (1, 8) for i in range(200)]
        frame = sample_frame(rows).assign(run_id=run_id, concurrency=[1] * 200 + [8] * 200)
        slow = np.where(frame["concurrency"] == 8, slow_at_8, 1.0)
        return frame.assign(latency_s=np.exp(rng.normal(0, 0.2, len(frame))) * slow)

    checks = throughput_checks([between_runs(run("base", 1.0), run("cand", 2.0))], GatePolicy())
    status = {(c.concurrency, c.name.split(": ")[1]): c.status for c in checks}
    assert status == {
        (1, "output_tokens_per_s"): "pass",
        (1, "latency_s"): "pass",
        (8, "output_tokens_per_s"): "regression",
        (8, "latency_s"): "regression",
    }
