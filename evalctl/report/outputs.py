"""Write a run's summary files and build its terminal tables, from records only."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from evalctl.analysis.accuracy import accuracy_table
from evalctl.analysis.gate import RunFrames
from evalctl.analysis.lengths import accuracy_by_length
from evalctl.analysis.positions import accuracy_by_position
from evalctl.analysis.throughput import throughput_table
from evalctl.report.plots import accuracy_by_position as plot_by_position
from evalctl.report.plots import accuracy_vs_prefill, accuracy_vs_shots
from evalctl.runs import chunked_prefill_size

SUMMARY_FILE = "summary.csv"
LENGTH_FILE = "accuracy_by_prefill_length.csv"
THROUGHPUT_FILE = "throughput.csv"
POSITION_FILE = "accuracy_by_answer_position.csv"
PLOT_SHOTS = "accuracy_vs_shots.png"
PLOT_PREFILL = "accuracy_vs_prefill_length.png"
PLOT_POSITION = "accuracy_by_answer_position.png"


@dataclass(frozen=True)
class RunSummary:
    accuracy: pd.DataFrame
    by_length: pd.DataFrame
    throughput: pd.DataFrame
    by_position: pd.DataFrame  # prefix-recall only; empty for other tasks


def summarize(samples: pd.DataFrame) -> RunSummary:
    return RunSummary(accuracy_table(samples), accuracy_by_length(samples), throughput_table(samples), accuracy_by_position(samples))


def write_outputs(run_dir: Path, summary: RunSummary, title: str, chunked_prefill: int | None = None) -> list[Path]:
    keys = ["profile", "variant", "cache", "shots", "pass_index"]
    merged = summary.accuracy.merge(summary.throughput, on=keys, how="left")
    merged.to_csv(run_dir / SUMMARY_FILE, index=False)
    summary.by_length.to_csv(run_dir / LENGTH_FILE, index=False)
    summary.throughput.to_csv(run_dir / THROUGHPUT_FILE, index=False)
    written = [
        run_dir / SUMMARY_FILE,
        accuracy_vs_shots(summary.accuracy, run_dir / PLOT_SHOTS, title),
        accuracy_vs_prefill(summary.by_length, run_dir / PLOT_PREFILL, title, chunked_prefill),
    ]
    if len(summary.by_position):
        summary.by_position.to_csv(run_dir / POSITION_FILE, index=False)
        written.append(plot_by_position(summary.by_position, summary.by_length, run_dir / PLOT_POSITION, title, chunked_prefill))
    return written


def write_run_summary(run: RunFrames, run_dir: Path) -> RunSummary:
    """Summarize a loaded run and write its summary files and plots into its folder, titled from its manifest."""
    summary = summarize(run.samples)
    cfg = run.manifest.get("config", {})
    title = f"{cfg.get('model', '?')} {cfg.get('task', '')} ({run.run_id})"
    write_outputs(run_dir, summary, title=title, chunked_prefill=chunked_prefill_size(run.manifest))
    return summary
