"""A task of the suite's own (tests/tasks/toy_arith: YAML and two small JSON files), end to end on the
real llama.cpp CPU server with --include-path. Its filters are `first-number` and `any-number`, not
GSM8K's: the metric must be scored, gated and reported under the task's own names."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import cpu_profile, evalctl, only_run, write_sweep_config

from evalctl.analysis.gate import GatePolicy, evaluate
from evalctl.config_files import POLICY_FOLDER, find
from evalctl.errors import ExitCode
from evalctl.runs import load_run

pytestmark = pytest.mark.server

TASK_DIR = Path(__file__).parent / "tasks" / "toy_arith"
METRICS = ["first-number", "any-number"]
QUESTIONS = 6  # of the task's 12


@pytest.mark.rotating(slice=1)  # slow, and not its component's only check: rotates (docs/testing.md's slice table)
def test_a_task_of_yaml_and_json_runs_end_to_end_under_its_own_metric_names(tmp_path, no_orphans, cpu_server):
    cfg = write_sweep_config(tmp_path, None, [cpu_profile(parallel=4)], shots=[1, 2], cache=["on", "off"], limit=QUESTIONS,
                             generation={"max_tokens": 8})  # fmt: skip
    out = evalctl("sweep", "--config", str(cfg), "--url", cpu_server, "--task", "toy-arith", "--include-path", str(TASK_DIR))
    assert out.returncode in (0, 1, 2), out.stdout + out.stderr  # a verdict, not a tool failure
    run = only_run(tmp_path / "out")

    samples = pd.read_parquet(run / "samples.parquet")
    assert len(samples) == QUESTIONS * 2 * 2 and samples.error.isna().all()
    for metric in METRICS:
        assert samples[f"{metric}_correct"].notna().all()
    assert not {"strict_correct", "flexible_correct"} & set(samples.columns)
    # scored by the task's own filters: any-number accepts whatever first-number accepts, never less
    assert (samples["any-number_correct"] >= samples["first-number_correct"]).all()
    recomputed = samples["any-number_answer"] == samples["target"]
    assert (samples["any-number_correct"] == recomputed).all()
    assert json.loads((run / "manifest.json").read_text())["metrics"] == METRICS

    summary = pd.read_csv(run / "summary.csv")
    assert {"first-number_acc", "first-number_lo", "any-number_acc"} <= set(summary.columns)
    assert len(summary) == 4

    gate = evalctl("gate", str(run))
    assert gate.returncode in (0, 1, 2), gate.stdout + gate.stderr
    written = json.loads((run / "gate.json").read_text())
    assert written["policy"]["metric"] == "first-number"  # the task's first, by default
    assert any(c.get("metric") == "first-number accuracy drop" for c in written["checks"])
    assert "first-number" in gate.stdout

    other = evaluate(load_run(run), GatePolicy(metric="any-number"))
    assert other.policy.metric == "any-number"
    assert {c.metric for c in other.checks if c.kind == "accuracy"} == {"any-number accuracy drop"}
    policy = tmp_path / "strict.yaml"
    policy.write_text("metric: strict\n")  # GSM8K's name: this task has no such metric
    wrong = evalctl("gate", str(run), "--policy", str(policy), "--output", str(tmp_path / "strict"))
    assert wrong.returncode == ExitCode.BAD_INPUT, wrong.stdout + wrong.stderr
    assert "unknown metric 'strict': this run's task scores first-number, any-number" in wrong.stderr
    # the CPU smoke policy names GSM8K's and prefix-recall's metric: any other task is judged by its first
    smoke = evalctl("gate", str(run), "--policy", str(find("cpu-smoke", POLICY_FOLDER).path), "--output", str(tmp_path / "smoke"))
    assert smoke.returncode in (0, 1, 2), smoke.stdout + smoke.stderr
    assert json.loads((tmp_path / "smoke" / "gate.json").read_text())["policy"]["metric"] == "first-number"

    report = evalctl("report", str(run))
    assert report.returncode == 0, report.stderr
    html = (run / "report.html").read_text()
    assert "Sign-off matrix (first-number accuracy" in html and "any-number" in html
