"""Concurrency as a paired sweep axis, against the session's shared CPU server (--url): the same prompts at
concurrency 1 and 8, each level-8 cell judged against its level-1 cell question by question, and the
requests the server was sent at once measured from the records. Behind `--canary cross-talk` (a request
arriving while another is in flight gets most of its prompt from another's) the level-8 cell is a
regression, and against the healthy run as its baseline the level-1 cell passes and the level-8 cell does not.

Sized for power, cut for CI: cache on only, prefix-recall at 4 records a list (about 70 prompt tokens, where
SmolLM2-135M recalls about two in three; at 40 records it recalls 0.4 to 0.6, which caps the drop a
canary can show below the tolerance's 80%-power size at 40 questions) and 80 questions a cell, each its
own list. Against the healthy run the level-8 cell's drop clears 0.15 under Holm over three checks in
more than 99.7% of draws (simulated with the gate's own rule at 0.6 healthy and 0.1 behind the canary),
and a healthy level-8 cell still passes with 4 batch-variant flips one way: two cells a sweep, two sweeps.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import evalctl, only_run

from evalctl.analysis.throughput import throughput_table

pytestmark = pytest.mark.server
QUESTIONS, RECORDS = 80, 4


def concurrency_sweep(cpu_server: str, out: Path, *extra: str) -> tuple[Path, dict, pd.DataFrame]:
    args = ["--shots", str(RECORDS), "--limit", str(QUESTIONS), "--concurrency", "1,8", "--cache", "on", "--output", str(out)]
    result = evalctl("sweep", "--model", "smollm2-135m", "--url", cpu_server, *args, *extra, timeout=1500)
    assert result.returncode in (0, 1), result.stdout + result.stderr  # 1: a regression
    run = only_run(out)
    return run, json.loads((run / "gate.json").read_text()), pd.read_parquet(run / "samples.parquet")


def accuracy_by_level(gate: dict, comparison: str) -> dict[int, dict]:
    return {c["concurrency"]: c for c in gate["checks"] if c["kind"] == "accuracy" and c["comparison"] == comparison}


@pytest.fixture(scope="module")
def healthy(cpu_server, tmp_path_factory) -> tuple[Path, dict, pd.DataFrame]:
    return concurrency_sweep(cpu_server, tmp_path_factory.mktemp("concurrency") / "healthy")


def test_levels_ask_the_same_questions_the_server_holds_them_and_a_healthy_server_passes(healthy):
    _, gate, samples = healthy
    asked = {level: set(zip(rows.doc_id, rows.prompt_hash)) for level, rows in samples.groupby("concurrency")}
    assert asked[1] == asked[8] and len(asked[1]) == QUESTIONS  # paired: the same prompts at each level
    assert samples.prompt_hash.nunique() == QUESTIONS  # each its own record list: distinct prefixes in flight
    held = throughput_table(samples).set_index("concurrency")
    assert held.loc[1, "in_flight_max"] == 1 and held.loc[8, "in_flight_max"] == 8 and held.loc[8, "in_flight_mean"] > 4
    [check] = accuracy_by_level(gate, "concurrency 8 vs 1").values()
    assert (check["n"], check["status"]) == (QUESTIONS, "pass"), check["reason"]
    assert "in flight on average (max 8) vs 1.0 in flight on average (max 1) at concurrency 1" in check["reason"]
    print(f"healthy: {check['reason']}")


def test_behind_the_cross_talk_canary_the_high_level_is_a_regression_and_the_low_level_passes(cpu_server, healthy, tmp_path):
    run, gate, samples = concurrency_sweep(cpu_server, tmp_path / "canary", "--canary", "cross-talk")
    [within] = accuracy_by_level(gate, "concurrency 8 vs 1").values()
    assert within["status"] == "regression", within["reason"]
    # Against the healthy run, cell by cell: one request at a time is never touched.
    judged = evalctl("gate", str(run), "--baseline", str(healthy[0]), "--output", str(tmp_path / "gate"))
    assert judged.returncode == 1, judged.stdout + judged.stderr
    against = accuracy_by_level(json.loads((tmp_path / "gate" / "gate.json").read_text()), "run vs baseline")
    assert against[1]["status"] == "pass" and against[8]["status"] == "regression", (against[1]["reason"], against[8]["reason"])
    accuracy = samples.groupby("concurrency").flexible_correct.mean().round(2).to_dict()
    print(f"behind cross-talk: {within['reason']}; accuracy by level {accuracy}")
