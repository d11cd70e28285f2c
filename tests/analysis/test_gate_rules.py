"""The gate's decision rules, one test per defect of issue 12, on hand-made frames."""

from __future__ import annotations

import re

import numpy as np
import pytest
from frames import manifest_for, sweep_frame

from evalctl.analysis.drop_rule import decide_drops
from evalctl.analysis.gate import GatePolicy, RunFrames, evaluate
from evalctl.analysis.power import mde_beyond_tolerance

POLICY = GatePolicy()


def gate(df, baseline=None, policy=POLICY):
    return evaluate(RunFrames("r", df, manifest_for(df)), policy, baseline)


def accuracy(result):
    return [c for c in result.checks if c.kind == "accuracy"]


def test_a_drop_not_shown_beyond_the_tolerance_is_no_regression():
    # 1319 questions, 48 right->wrong and 5 back: a 3.3-point drop, far from 0 (McNemar p ~ 1e-9)
    # but not shown to exceed the 3-point tolerance.
    inside = gate(sweep_frame(n=1319, shots=(8,), to_wrong={8: set(range(48))}, to_right={8: set(range(1100, 1105))}))
    (check,) = accuracy(inside)
    assert check.value == pytest.approx(43 / 1319)
    assert (inside.verdict, check.status) == ("inconclusive", "inconclusive")
    assert check.p_adjusted > POLICY.alpha and "cannot tell" in check.reason
    # A 9-point drop is shown to exceed it.
    beyond = gate(sweep_frame(n=1319, shots=(8,), to_wrong={8: set(range(120))}))
    assert beyond.verdict == "regression" and "beyond 0.030" in accuracy(beyond)[0].reason


def test_request_errors_cannot_hide_a_drop():
    # The case: a true 4.0-point drop (53 of 1319 questions lost), 26 of them as HTTP 500
    # instead of wrong answers: 1.97% errors, under the 2% error-rate cap.
    df = sweep_frame(n=1319, shots=(8,), to_wrong={8: set(range(53))}).astype({"strict_correct": object})
    failed = (df["cache"] == "on") & (df["doc_id"] < 26)
    df.loc[failed, ["error", "error_kind", "strict_correct", "strict_answer"]] = ["HTTP 500", "http_5xx", None, None]
    result = gate(df)
    assert result.verdict in {"regression", "inconclusive"}
    (check,) = accuracy(result)
    assert (check.n, check.b, check.value) == (1319, 53, pytest.approx(53 / 1319))
    assert "26 of them request errors" in check.reason
    assert {c.status for c in result.checks if c.kind == "error_rate"} == {"pass"}


def test_a_baseline_that_pairs_only_some_cells_is_inconclusive_and_says_why():
    # The candidate is 15 points worse than the baseline at 16 and 20 shots (both cache modes),
    # but the baseline's prompts match only at 8 shots.
    cand = sweep_frame(run_id="cand").astype({"strict_correct": bool})
    worse = cand["shots"].isin([16, 20]) & (cand["doc_id"] < 30)
    cand.loc[worse, "strict_correct"] = False
    base = sweep_frame(run_id="base")
    base["prompt_hash"] = np.where(base["shots"] == 8, base["prompt_hash"], "other-" + base["prompt_hash"])
    result = gate(cand, baseline=RunFrames("base", base, manifest_for(base)))
    assert result.verdict == "inconclusive"
    unpaired = [c for c in accuracy(result) if c.name == "run vs baseline" and c.n is None]
    assert {(c.cache, c.shots) for c in unpaired} == {(m, s) for m in ("on", "off") for s in (16, 20)}
    assert all(c.status == "inconclusive" and "other prompts" in c.reason for c in unpaired)
    # No overlap at all, through evaluate() as `evalctl report` calls it: inconclusive, not pass.
    base["prompt_hash"] = "other-" + base["prompt_hash"]
    result = gate(sweep_frame(run_id="cand"), baseline=RunFrames("base", base, manifest_for(base)))
    assert result.verdict == "inconclusive"
    assert len([c for c in accuracy(result) if c.name == "run vs baseline" and c.status == "inconclusive"]) == 6


def test_the_cliff_describes_but_never_decides():
    # The same 5 of 100 questions flip at each of 13 shot counts: each cell alone shows little, the
    # cliff's pooled tail counts those 5 questions 13 times over.
    shots = tuple(range(8, 21))
    df = sweep_frame(n=100, shots=shots, to_wrong={s: set(range(5)) for s in shots})
    result = gate(df)
    assert not result.cliffs.empty  # still reported: where accuracy departs
    assert "cliff" not in {c.kind for c in result.checks}
    assert result.verdict == "inconclusive"


def test_the_mde_shown_is_the_drop_the_rule_finds_with_80_percent_power():
    # 13 cells of 1319, 80 flips one way and 59 back: a 1.6-point drop, inconclusive at 3 points.
    shots = tuple(range(8, 21))
    df = sweep_frame(n=1319, shots=shots, to_wrong={s: set(range(80)) for s in shots}, to_right={s: set(range(1100, 1159)) for s in shots})
    checks = accuracy(gate(df))
    assert {c.status for c in checks} == {"inconclusive"}
    shown = {float(re.search(r"a drop of ([0-9.]+) would be found", c.reason).group(1)) for c in checks}
    (mde,) = shown
    assert mde == pytest.approx(mde_beyond_tolerance(1319, 2 * 59 / 1319, 0.03, 0.05, 0.8, 13), abs=1e-3)
    assert mde > 0.03 + 0.015  # beyond the tolerance, and Holm over 13 checks costs more
    # The rule itself, simulated: one cell of 13 drops by the MDE (noise flips 59/1319 each way).
    rng = np.random.default_rng(0)
    q = 59 / 1319
    runs, m = 4000, 13
    p = np.array([[q, q, 1 - 2 * q]] * m)
    p[0] = [q + mde, q, 1 - 2 * q - mde]
    counts = np.stack([rng.multinomial(1319, row, size=runs) for row in p], axis=1)
    decided = decide_drops(counts[..., 0], counts[..., 1], np.full((runs, m), 1319), 0.03, 0.05)
    power = (decided.status[:, 0] == "regression").mean()
    assert power == pytest.approx(0.8, abs=0.05)
    # With no flips at all the MDE is finite (the old formula had none above the discordance).
    assert mde_beyond_tolerance(200, 0.0, 0.03, 0.05, 0.8, 1) < 0.2


def timed(df, slow, outlier=None):
    rng = np.random.default_rng(5)
    df = df.copy()
    df["latency_s"] = np.exp(rng.normal(0, 0.2, len(df))) * np.where(df["cache"] == "on", slow, 1.0)
    if outlier is not None:
        df.loc[(df["cache"] == "on") & (df["doc_id"] == 0), "latency_s"] = outlier
    return df


def test_throughput_is_judged_on_requests_not_one_ratio():
    df = sweep_frame(n=200, shots=(8,))
    # One stalled request stretches the cache-on cell's wall clock (its requests/s ratio is 0.17),
    # while every other request is as fast as with cache off.
    stalled = gate(timed(df, 1.0, outlier=100.0))
    tp = [c for c in stalled.checks if c.kind == "throughput"]
    assert tp and all(c.status == "pass" for c in tp), [c.reason for c in tp]
    # Every request twice as slow: a regression, on latency and tokens/s alike.
    slow = gate(timed(df, 2.0))
    assert {c.status for c in slow.checks if c.kind == "throughput"} == {"regression"}
    assert slow.verdict == "regression"
