"""Write a run's summary files and build its terminal tables, from records only."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from evalctl.analysis.summary import RunSummary, run_summary
from evalctl.fsio import write_atomic
from evalctl.records import CELL_KEYS, Metric
from evalctl.report.plots import accuracy_by_position as plot_by_position
from evalctl.report.plots import accuracy_vs_prefill, accuracy_vs_shots
from evalctl.runs import Run

SUMMARY_FILE = "summary.csv"
LENGTH_FILE = "accuracy_by_prefill_length.csv"
THROUGHPUT_FILE = "throughput.csv"
POSITION_FILE = "accuracy_by_answer_position.csv"
PLOT_SHOTS = "accuracy_vs_shots.png"
PLOT_PREFILL = "accuracy_vs_prefill_length.png"
PLOT_POSITION = "accuracy_by_answer_position.png"


def write_csv(df: pd.DataFrame, path: Path) -> Path:
    return write_atomic(path, df.to_csv(index=False))


def write_outputs(run_dir: Path, summary: RunSummary, title: str, chunked_prefill: int | None = None) -> list[Path]:
    merged = summary.accuracy.merge(summary.throughput, on=CELL_KEYS, how="left")
    write_csv(merged, run_dir / SUMMARY_FILE)
    write_csv(summary.by_length, run_dir / LENGTH_FILE)
    write_csv(summary.throughput, run_dir / THROUGHPUT_FILE)
    written = [
        run_dir / SUMMARY_FILE,
        accuracy_vs_shots(summary.accuracy, run_dir / PLOT_SHOTS, title, summary.metric),
        accuracy_vs_prefill(summary.by_length, run_dir / PLOT_PREFILL, title, chunked_prefill, summary.metric),
    ]
    if len(summary.by_position):
        write_csv(summary.by_position, run_dir / POSITION_FILE)
        written.append(
            plot_by_position(summary.by_position, summary.by_length, run_dir / PLOT_POSITION, title, chunked_prefill, summary.metric)
        )
    return written


def run_title(run: Run) -> str:
    return f"{run.config.get('model', '?')} {run.config.get('task', '')} ({run.run_id})"


def write_run_summary(run: Run, metric: Metric | None = None) -> RunSummary:
    """Write a run's summary files and plots into its folder, titled from its manifest; the summary."""
    summary = run_summary(run, metric)
    write_outputs(run.path, summary, title=run_title(run), chunked_prefill=run.chunked_prefill_size)
    return summary
