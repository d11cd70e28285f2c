"""Concurrency as a paired sweep axis, against the session's shared CPU server (--url): the same prompts at
concurrency 1 and 8, each level-8 cell judged against its level-1 cell question by question, and the
requests the server was sent at once measured from the records. Behind `--canary cross-talk` (a request
arriving while another is in flight gets most of its prompt from the other's) the level-8 cells are a
regression and the level-1 cells pass.

Cut for CI: prefix-recall at 30 records (about 290 prompt tokens) and 30 questions a cell (min_n; a cell
asks each record at most once, so no fewer records).
The healthy sweep runs cache on only (2 cells); the canary's cache on and off (4 cells: the canary
stands in front of the cache-on server, so cache off is its healthy control at both levels).
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import evalctl, only_run

from evalctl.analysis.throughput import throughput_table

pytestmark = pytest.mark.server
QUESTIONS = 30  # min_n pairs, and the records of each prompt


def concurrency_sweep(cpu_server: str, out, *extra: str) -> tuple[dict, pd.DataFrame]:
    args = ["--url", cpu_server, "--shots", str(QUESTIONS), "--limit", str(QUESTIONS), "--concurrency", "1,8", "--output", str(out), *extra]
    result = evalctl("sweep", "--model", "smollm2-135m", *args, timeout=1500)
    assert result.returncode in (0, 1), result.stdout + result.stderr  # 1: a regression
    run = only_run(out)
    return json.loads((run / "gate.json").read_text()), pd.read_parquet(run / "samples.parquet")


def level_checks(gate: dict) -> dict[tuple[str, int], dict]:
    """The accuracy checks by (comparison kind, cache, level): 'concurrency' or 'cache'."""
    checks = [c for c in gate["checks"] if c["kind"] == "accuracy"]
    return {("concurrency" if c["comparison"].startswith("concurrency") else "cache", c["cache"], c["concurrency"]): c for c in checks}


def test_levels_ask_the_same_questions_the_server_holds_them_and_a_healthy_server_passes(cpu_server, tmp_path, no_orphans):
    gate, samples = concurrency_sweep(cpu_server, tmp_path / "healthy", "--cache", "on")
    asked = {level: set(zip(rows.doc_id, rows.prompt_hash)) for level, rows in samples.groupby("concurrency")}
    assert asked[1] == asked[8] and len(asked[1]) == QUESTIONS  # paired: the same prompts at each level
    assert samples.prompt_hash.nunique() == QUESTIONS  # each its own record list: distinct prefixes in flight
    held = throughput_table(samples).set_index("concurrency")
    assert held.loc[1, "in_flight_max"] == 1 and held.loc[8, "in_flight_max"] == 8 and held.loc[8, "in_flight_mean"] > 4
    [check] = level_checks(gate).values()
    assert (check["comparison"], check["n"], check["status"]) == ("concurrency 8 vs 1", QUESTIONS, "pass"), check["reason"]
    assert "in flight on average (max 8) vs 1.0 in flight on average (max 1) at concurrency 1" in check["reason"]
    print(f"healthy: {check['reason']}")


def test_behind_the_cross_talk_canary_the_high_level_is_a_regression_and_the_low_level_passes(cpu_server, tmp_path, no_orphans):
    gate, samples = concurrency_sweep(cpu_server, tmp_path / "canary", "--cache", "on,off", "--canary", "cross-talk")
    checks = level_checks(gate)
    assert checks["concurrency", "on", 8]["status"] == "regression", checks["concurrency", "on", 8]["reason"]
    assert checks["cache", "on", 8]["status"] == "regression", checks["cache", "on", 8]["reason"]
    assert checks["cache", "on", 1]["status"] == "pass", checks["cache", "on", 1]["reason"]  # one at a time: untouched
    assert checks["concurrency", "off", 8]["status"] == "pass", checks["concurrency", "off", 8]["reason"]  # no canary there
    accuracy = samples.groupby(["cache", "concurrency"]).flexible_correct.mean()
    print(f"behind cross-talk, accuracy by (cache, level): {accuracy.round(2).to_dict()}")
