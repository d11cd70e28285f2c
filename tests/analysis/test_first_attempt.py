"""The first-attempt check on hand-built frames: retried answers are evidence, judged by the paired drop rule."""

from __future__ import annotations

from pathlib import Path

from frames import manifest_for, sweep_frame

from evalctl.analysis.checks.first_attempt import first_attempt_checks
from evalctl.analysis.gate import GatePolicy, evaluate
from evalctl.analysis.pairing import between_runs
from evalctl.runs import Run

FAILED = {"error_kind": "http_5xx", "error": "HTTP 500: canary: fail-on-hit", "latency_s": 0.01}


def retried(df, cache: str, docs: range, kind: str | None = "http_5xx"):
    """`df` with the requests of `docs` in the `cache` arm answered on their second attempt, the first failed with `kind`."""
    rows = (df.cache == cache) & df.doc_id.isin(docs)
    df = df.astype({"first_error_kind": object, "failed_attempts": object})
    df.loc[rows, "attempts"] = 2
    df.loc[rows, "first_error_kind"] = kind
    df["failed_attempts"] = [[{**FAILED, "error_kind": kind}] if r else a for r, a in zip(rows, df["failed_attempts"])]
    return df


# The cpu-smoke policy's figures: 40 pairs without a flip pass accuracy at 0.15 and first attempts at 0.10.
SHIPPED = GatePolicy(max_accuracy_drop=0.15, max_first_attempt_failure_increase=0.10)


def gate(df, policy: GatePolicy | None = None):
    return evaluate(Run(Path("r"), manifest_for(df), df), policy or GatePolicy())


def first_attempt(result):
    return [c for c in result.checks if c.kind == "first-attempt"]


def test_a_cache_on_arm_whose_first_attempts_fail_is_a_regression_though_every_answer_is_right():
    df = retried(sweep_frame(n=40, shots=(8,)), "on", range(9))
    result = gate(df, SHIPPED)
    [found] = first_attempt(result)
    assert found.status == "regression" and result.verdict == "regression"
    assert (found.b, found.c, found.n) == (9, 0, 40) and found.comparison == "cache on vs off" and found.family == "first-attempt"
    assert (
        "cache on: 9 of 40 requests failed their first attempt (http_5xx) and were answered on a retry; cache off: 0 of 40" in found.reason
    )
    # what made it look healthy: every answer right, no request error
    assert {c.kind: c.status for c in result.checks if c.kind in ("accuracy", "error_rate")} == {"accuracy": "pass", "error_rate": "pass"}


def test_equal_arms_pass_and_so_does_a_run_without_any_failed_first_attempt():
    healthy = sweep_frame(n=40, shots=(8,))
    [clean] = first_attempt(gate(healthy, SHIPPED))
    assert clean.status == "pass" and "cache on: 0 of 40 requests failed their first attempt; cache off: 0 of 40" in clean.reason
    both = retried(retried(sweep_frame(n=200, shots=(8,)), "on", range(5), "timeout"), "off", range(5), "timeout")
    [equal] = first_attempt(gate(both, SHIPPED))
    assert equal.status == "pass" and (equal.b, equal.c) == (0, 0), equal.reason
    assert (
        "cache on: 5 of 200 requests failed their first attempt (timeout) and were answered on a retry; cache off: 5 of 200" in equal.reason
    )


def test_few_pairs_are_inconclusive_and_say_so():
    df = retried(sweep_frame(n=20, shots=(8,)), "on", range(20))
    [found] = first_attempt(gate(df))
    assert found.status == "inconclusive" and found.reason.startswith("only 20 pairs (min_n 30); cache on: 20 of 20")


def test_kinds_are_counted_and_a_request_that_never_got_an_answer_counts_too():
    df = retried(retried(sweep_frame(n=60, shots=(8,)), "on", range(10)), "on", range(10, 14), "timeout")
    df = df.astype({"error": object, "error_kind": object})
    df.loc[(df.cache == "on") & (df.doc_id == 20), ["error", "error_kind", "attempts"]] = ["HTTP 500: x", "http_5xx", 4]
    [found] = first_attempt(gate(df))
    assert "cache on: 15 of 60 requests failed their first attempt (http_5xx 11, timeout 4) 14 of them answered on a retry" in found.reason


def test_an_older_run_without_first_error_kind_still_counts_its_retried_answers():
    df = retried(sweep_frame(n=40, shots=(8,)), "on", range(12))
    df["first_error_kind"], df["failed_attempts"] = None, None  # as LATER_COLUMNS reads a run folder from before them
    [found] = first_attempt(gate(df))
    assert found.status == "regression" and "12 of 40 requests failed their first attempt (kind unrecorded)" in found.reason


def test_a_run_against_its_baseline_is_judged_too():
    baseline = sweep_frame(n=40, shots=(8,), run_id="base")
    candidate = retried(sweep_frame(n=40, shots=(8,)), "on", range(40), "connection")
    checks = first_attempt_checks([between_runs(baseline, candidate)], SHIPPED)
    by_cache = {c.cache: c for c in checks}
    assert by_cache["on"].status == "regression" and by_cache["off"].status == "pass"
    assert "this run: 40 of 40 requests failed their first attempt (connection)" in by_cache["on"].reason
    assert "; baseline run: 0 of 40" in by_cache["on"].reason
