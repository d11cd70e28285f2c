"""Finish a run folder from its records alone: summary files and plots, the gate's files, the HTML report.

The one step every finished run gets, watched or not (the cluster's aggregation job): new per-run outputs belong here.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from evalctl.analysis.gate import GatePolicy, GateResult, evaluate, load_policy
from evalctl.analysis.gate_document import GateDocument
from evalctl.analysis.summary import RunSummary, run_summary
from evalctl.fsio import write_atomic
from evalctl.records import CELL_KEYS, Metric
from evalctl.report.gate_outputs import write_gate_outputs
from evalctl.report.html import run_title, write_report
from evalctl.report.plots import accuracy_by_position, accuracy_vs_prefill, accuracy_vs_shots
from evalctl.runs import Run

REPORT_FILE = "report.html"


def write_csv(df: pd.DataFrame, path: Path) -> Path:
    return write_atomic(path, df.to_csv(index=False))


def write_run_summary(run: Run, metric: Metric | None = None) -> RunSummary:
    """Write a run's summary files and plots into its folder, titled from its manifest; the summary."""
    summary = run_summary(run, metric)
    folder, title, chunk = run.path, run_title(run), run.chunked_prefill_size
    write_csv(summary.accuracy.merge(summary.throughput, on=CELL_KEYS, how="left"), folder / "summary.csv")
    write_csv(summary.by_length, folder / "accuracy_by_prefill_length.csv")
    write_csv(summary.throughput, folder / "throughput.csv")
    accuracy_vs_shots(summary.accuracy, folder / "accuracy_vs_shots.png", title, summary.metric)
    accuracy_vs_prefill(summary.by_length, folder / "accuracy_vs_prefill_length.png", title, chunk, summary.metric)
    if len(summary.by_position):
        write_csv(summary.by_position, folder / "accuracy_by_answer_position.csv")
        accuracy_by_position(
            summary.by_position, summary.by_length, folder / "accuracy_by_answer_position.png", title, chunk, summary.metric
        )
    return summary


def finish_run(run: Run, policy: GatePolicy | None = None, baseline: Run | None = None) -> GateResult:
    """Write the run's outputs, gate files (gate.json ...) and report.html; the gate's result
    (by default the policy the run's config names, else the built-in; against `baseline`, if given)."""
    policy = (policy or load_policy(run.manifest.gate_policy)).for_run(run)
    write_run_summary(run, policy.metric)
    result = evaluate(run, policy, baseline)
    write_gate_outputs(result, run.path)
    write_report(run, run.path / REPORT_FILE, baseline=baseline, gate=GateDocument.of(result))
    return result
