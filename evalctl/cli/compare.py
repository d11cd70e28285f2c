"""`evalctl compare`: two runs side by side per cell, with paired tests and the questions that flipped."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evalctl.cli.common import console, fail


def compare(
    base: Annotated[Path, typer.Argument(help="The baseline run folder.")],
    candidate: Annotated[Path, typer.Argument(help="The candidate run folder.")],
    metric: Annotated[
        str | None,
        typer.Option(
            help="The task's metric to score (gsm8k: strict or flexible), or agreement (each answer vs the same server's "
            "cache-off one); default: the task's first."
        ),
    ] = None,
    show: Annotated[int, typer.Option(help="Flipped questions to print (all go to --flips-csv).", min=0)] = 20,
    flips_csv: Annotated[Path | None, typer.Option(help="Write every flipped question, with full responses, to this CSV.")] = None,
) -> None:
    """Compare two runs cell by cell on their common questions: accuracy with 95% Wilson intervals, the paired
    drop, exact McNemar p (two-sided, Holm-adjusted across cells), throughput ratios, the flipped questions, and
    the resolved server settings that differ (flagged: the runs did not serve alike).

    Exit status (table: evalctl --help): PASS when compared; BAD_INPUT for unusable input (missing or corrupt run
    folder, runs without common questions).
    """
    from evalctl.analysis.summary import compare_runs
    from evalctl.fsio import write_atomic
    from evalctl.report.terminal import flips_view, frame_table, paired_view, ratio_view, settings_view
    from evalctl.runs import load_run

    ref, cand = load_run(base), load_run(candidate)
    compared = compare_runs(ref, cand, metric)
    title = f"{compared.metric} accuracy: {cand.run_id} vs baseline {ref.run_id} (paired questions only)"
    console.print(frame_table(paired_view(compared.paired), title))
    console.print(frame_table(ratio_view(compared.throughput), "Throughput, candidate / baseline"))
    settings, flipped = compared.settings, compared.flipped
    console.print(frame_table(settings_view(settings), "Resolved server settings that differ, baseline -> candidate"))
    if len(settings):
        names = ", ".join(sorted(set(settings["setting"])))
        console.print(f"[magenta]flag:[/] resolved setting(s) differ from the baseline's: {names}", highlight=False, soft_wrap=True)
    console.print(frame_table(flips_view(flipped.head(show)), f"Flipped questions ({min(show, len(flipped))} of {len(flipped)})"))
    if flips_csv is not None:
        try:
            write_atomic(flips_csv, flipped.to_csv(index=False))
        except OSError as exc:
            raise fail(f"cannot write {flips_csv}: {exc.strerror}") from None
        console.print(f"flipped questions: {flips_csv}")
    console.print(f"{compared.pairs} paired records of {len(ref.samples)} (baseline) and {len(cand.samples)} (candidate)")
