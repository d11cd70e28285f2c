"""`evalctl history`: one metric of one model across runs, at one cell."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evalctl.cli.common import console, fail


def history(
    model: Annotated[str, typer.Option("--model", "-m", help="Model label (as in the run's config).")],
    metric: Annotated[
        str,
        typer.Option(
            help="accuracy (each run's primary metric: gsm8k's strict), a task's metric by name, or throughput (output tokens/s)."
        ),
    ] = "accuracy",
    shots: Annotated[int | None, typer.Option(help="Few-shot count of the cell; default: every count.")] = None,
    cache: Annotated[str | None, typer.Option(help="Prefix cache of the cell: on or off; default: both.")] = None,
    profile: Annotated[str | None, typer.Option(help="Only this server profile.")] = None,
    variant: Annotated[str | None, typer.Option(help="Only this variant.")] = None,
    root: Annotated[Path, typer.Option("--root", help="Results folder holding the run folders.")] = Path("results"),
    plot: Annotated[Path | None, typer.Option(help="Also write a trend plot (PNG) here.")] = None,
) -> None:
    """Print a model's metric per run (oldest first) at one cell, first pass, from the run folders."""
    from evalctl.history.store import HistoryStore, shown_metric
    from evalctl.report.terminal import history_table

    if cache is not None and cache not in ("on", "off"):
        raise fail(f"--cache must be on or off, got {cache!r}")
    trend = HistoryStore(root).history(model, metric, shots=shots, cache=cache, profile=profile, variant=variant)
    if trend.empty:
        console.print(f"no compacted runs of {model} in {root} at that cell")
        return
    label = "output tok/s" if metric == "throughput" else f"{shown_metric(trend) if metric == 'accuracy' else metric} accuracy"
    console.print(history_table(trend, label, f"{model}: {label}"))
    if plot is not None:
        from evalctl.report.plots import history_trend

        ylabel = label if metric == "throughput" else f"{label} (95% Wilson)"
        history_trend(trend, plot, title=f"{model}: {label}", ylabel=ylabel)
        console.print(f"plot: {plot}")
