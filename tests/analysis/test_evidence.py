"""The verdict's evidence: the deciding checks, their counts, and the requests that part earliest from their reference."""

from __future__ import annotations

import pandas as pd
from frames import sample_frame, sweep_frame

from evalctl.analysis.checks.accuracy import accuracy_checks
from evalctl.analysis.checks.base import Check, verdict_of
from evalctl.analysis.evidence import PartedRequest, deciding_evidence
from evalctl.analysis.gate import GatePolicy
from evalctl.analysis.pairing import within_run

POLICY = GatePolicy(max_accuracy_drop=0.15)


def judged(df: pd.DataFrame, policy: GatePolicy = POLICY):
    """The accuracy checks of a run's comparisons, the verdict they give, and the evidence for it."""
    comparisons = within_run(df, "default", "cpu")
    checks = accuracy_checks(comparisons, policy)
    verdict = verdict_of(c.status for c in checks)
    return verdict, deciding_evidence(verdict, checks, comparisons)


def set_response(df: pd.DataFrame, cache: str, shots: int, doc: int, response: str) -> pd.DataFrame:
    at = (df["cache"] == cache) & (df["shots"] == shots) & (df["doc_id"] == doc)
    return df.assign(response=df["response"].where(~at, response))


def test_a_regression_names_its_regressed_cell_with_counts_and_the_earliest_parting_requests_first():
    df = sweep_frame(n=60, shots=(8, 16), to_wrong={8: set(range(20))})  # "#### 1" -> "#### -1": they part at character 5
    df = set_response(df, "on", 8, 5, "The answer is 5")  # parts at character 0: first, whatever its cached tokens
    verdict, evidence = judged(df)
    assert verdict == "regression" and evidence.position_unit == "characters"
    [check] = evidence.checks  # 16 shots passed: not evidence for a regression
    assert (check.kind, check.comparison, check.where) == ("accuracy", "cache on vs off", "cpu/default cache=on shots=8 conc=4 pass=1")
    assert (check.b, check.c, check.n) == (20, 0, 60)
    # Then, at one position, the most cached tokens first (sweep_frame: doc d caches 150 * shots + d % 50 - 60).
    assert check.worst == [
        PartedRequest(doc_id=5, prompt_tokens=1205, cached_tokens=1145, first_difference=0),
        PartedRequest(doc_id=19, prompt_tokens=1219, cached_tokens=1159, first_difference=5),
        PartedRequest(doc_id=18, prompt_tokens=1218, cached_tokens=1158, first_difference=5),
    ]


def test_an_inconclusive_verdict_names_every_undecided_check_and_a_cell_whose_answers_all_agree_has_no_request():
    df = sweep_frame(n=10, shots=(8, 16), to_wrong={16: {2}})
    verdict, evidence = judged(df)
    assert verdict == "inconclusive"
    assert [(c.where, c.n, len(c.worst)) for c in evidence.checks] == [
        ("cpu/default cache=on shots=8 conc=4 pass=1", 10, 0),
        ("cpu/default cache=on shots=16 conc=4 pass=1", 10, 1),
    ]


def test_a_pass_names_no_check():
    verdict, evidence = judged(sweep_frame(n=60, shots=(8,)))
    assert (verdict, evidence.checks) == ("pass", [])


def test_a_variant_is_compared_with_the_baseline_variant_at_the_same_cell_keys_not_with_cache_off():
    rows = [
        dict(variant=variant, cache=cache, doc_id=doc, prompt_hash=f"h{doc}", response=response, cached_tokens=cached, turn_kind="extend")
        for doc in range(40)
        for variant, cache, response, cached in (
            ("default", "off", "#### 1", 0),
            ("default", "on", "#### 1", 90),
            ("new", "off", "#### 1", 0),  # the new variant's cache-off answer agrees with default's
            ("new", "on", "#### 10" if doc < 3 else "#### 1", 90),  # parts at character 6 for docs 0-2
        )
    ]
    df = sample_frame(rows)
    comparisons = within_run(df, "default", "cpu")
    name = "variant new vs default"
    check = Check(name, "accuracy", "inconclusive", "why", "cpu", "new", "on", 8, 4, 1, comparison=name)
    [found] = deciding_evidence("inconclusive", [check], comparisons).checks
    assert [(r.doc_id, r.first_difference, r.turn_kind) for r in found.worst] == [(0, 6, "extend"), (1, 6, "extend"), (2, 6, "extend")]


def test_request_errors_have_no_response_to_compare_and_checks_that_pair_no_answers_get_counts_only():
    df = sweep_frame(n=40, shots=(8,), to_wrong={8: {1, 2}})
    failed = (df["cache"] == "on") & (df["doc_id"] == 1)
    df = df.assign(error=df["error"].where(~failed, "timeout"), response=df["response"].where(~failed, None))
    comparisons = within_run(df, "default", "cpu")
    cell = dict(profile="cpu", variant="default", cache="on", shots=8, concurrency=4, pass_index=1)
    floor = Check("cache on vs off against the A/A floor", "agreement-floor", "regression", "why", **cell, comparison="cache on vs off")
    rate = Check("error rate", "error_rate", "regression", "1 of 40 requests failed", **cell, n=40)
    found = deciding_evidence("regression", [floor, rate], comparisons).checks
    assert [r.doc_id for r in found[0].worst] == [2]  # the floor's answers are scored against cache off: the cache comparison's
    assert (found[1].kind, found[1].n, found[1].worst) == ("error_rate", 40, [])
