"""`evalctl analyze`: tables, summary files and plots again, from a run's records alone."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evalctl.cli.common import console, fail


def print_run(run_dir: Path) -> None:
    from evalctl.manifest import read_manifest
    from evalctl.records import load_samples
    from evalctl.report.outputs import summarize, write_outputs
    from evalctl.report.terminal import accuracy_view, frame_table, throughput_view

    try:
        samples = load_samples(run_dir)
        manifest = read_manifest(run_dir)
    except (FileNotFoundError, ValueError, OSError) as exc:
        raise fail(str(exc), 1) from None
    summary = summarize(samples)
    cfg = manifest.get("config", {})
    write_outputs(run_dir, summary, title=f"{cfg.get('model', '?')} {cfg.get('task', '')} ({manifest.get('run_id', run_dir.name)})")
    console.print(frame_table(accuracy_view(summary.accuracy), "Accuracy by cell (95% Wilson)"))
    console.print(
        frame_table(accuracy_view(summary.by_length.drop(columns=["bin_lo", "bin_hi"])), "Accuracy by prefill length (prompt tokens)")
    )
    console.print(frame_table(throughput_view(summary.throughput), "Throughput by cell"))


def analyze(run: Annotated[Path, typer.Argument(help="A run folder (results/<run>).", exists=False)]) -> None:
    """Rebuild tables, summary.csv and plots for a run from its records alone (no server)."""
    if not run.is_dir():
        raise fail(f"{run} is not a directory")
    print_run(run)
    console.print(f"run folder: {run}")
