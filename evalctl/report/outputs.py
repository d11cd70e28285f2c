"""Write a run's summary files and plots, from records only."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from evalctl.analysis.summary import RunSummary, run_summary
from evalctl.fsio import write_atomic
from evalctl.records import CELL_KEYS, Metric
from evalctl.report.plots import accuracy_by_position, accuracy_vs_prefill, accuracy_vs_shots
from evalctl.runs import Run


def write_csv(df: pd.DataFrame, path: Path) -> Path:
    return write_atomic(path, df.to_csv(index=False))


def run_title(run: Run) -> str:
    return f"{run.config.get('model', '?')} {run.config.get('task', '')} ({run.run_id})"


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
