"""The metric a gate policy judges a run by: one for every task, one per task name, or (absent) the task's first.

The packaged cpu-smoke policy names GSM8K's and prefix-recall's lenient metric; any other task
(its own filter names, as tests/tasks/toy_arith has) is judged by its first metric, not refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from frames import manifest_for, sweep_frame

from evalctl.analysis.gate import GatePolicy, evaluate, load_policy
from evalctl.config_files import POLICY_FOLDER, find
from evalctl.errors import BadInput
from evalctl.report.finish import finish_run
from evalctl.runs import Run

CPU_SMOKE = load_policy(find("cpu-smoke", POLICY_FOLDER).path)
# tests/tasks/toy_arith's filters, the primary first, in place of GSM8K's strict and flexible
TOY_METRICS = {"strict": "first-number", "flexible": "any-number"}


def run_of(task: str | None, folder: Path = Path("r")) -> Run:
    df = sweep_frame(n=60, shots=(8, 16))
    manifest = manifest_for(df)
    if task is not None:
        manifest.config["task"] = task
    if task not in (None, "gsm8k", "prefix-recall"):
        df = df.rename(columns={f"{old}{end}": f"{new}{end}" for old, new in TOY_METRICS.items() for end in ("_answer", "_correct")})
        manifest.metrics = list(TOY_METRICS.values())
    return Run(folder, manifest, df)


@pytest.mark.parametrize("task", ["gsm8k", "prefix-recall", None])  # None: a run from before tasks were named (GSM8K)
def test_cpu_smoke_judges_gsm8k_and_prefix_recall_by_flexible_as_before(task):
    assert evaluate(run_of(task), CPU_SMOKE).policy.metric == "flexible"


def test_cpu_smoke_judges_a_custom_task_by_its_first_metric(tmp_path):
    result = evaluate(run_of("toy-arith"), CPU_SMOKE)
    assert result.policy.metric == "first-number"
    assert {c.metric for c in result.checks if c.kind == "accuracy"} == {"first-number accuracy drop"}
    assert result.verdict != "regression"
    finished = finish_run(run_of("toy-arith", tmp_path), CPU_SMOKE)  # the summary files a sweep writes at its end, too
    assert finished.policy.metric == "first-number" and (tmp_path / "summary.csv").is_file()


def test_a_single_metric_is_every_tasks_and_one_the_task_lacks_is_refused():
    assert evaluate(run_of("toy-arith"), GatePolicy(metric="any-number")).policy.metric == "any-number"
    assert evaluate(run_of("toy-arith"), GatePolicy()).policy.metric == "first-number"
    with pytest.raises(BadInput, match="unknown metric 'flexible': this run's task scores first-number, any-number"):
        evaluate(run_of("toy-arith"), GatePolicy(metric="flexible"))
    with pytest.raises(BadInput, match="unknown metric 'flexible'"):
        evaluate(run_of("toy-arith"), GatePolicy(metric={"toy-arith": "flexible"}))
