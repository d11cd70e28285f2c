"""`evalctl analyze`: tables, summary files and plots again, from a run's records alone."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from evalctl.cli.common import console, say_if_running
from evalctl.cli.options import gate_policy_option

GatePolicyOption = gate_policy_option(": its metric, tolerance and alpha for the cliff")

if TYPE_CHECKING:
    from evalctl.analysis.gate import GateResult
    from evalctl.runs import Run


def print_run_tables(run: Run, result: GateResult) -> None:
    """The run's tables on the terminal: accuracy, by prefill length, throughput, the gate's paired checks, cliffs."""
    from evalctl.analysis.summary import run_summary
    from evalctl.report.terminal import accuracy_view, cliffs_table, decisions_table, frame_table, gate_paired_view, throughput_view

    policy, manifest = result.policy, run.manifest
    summary = run_summary(run, policy.metric)
    console.print(frame_table(accuracy_view(summary.accuracy), "Accuracy by cell (95% Wilson)"))
    console.print(
        frame_table(accuracy_view(summary.by_length.drop(columns=["bin_lo", "bin_hi"])), "Accuracy by prefill length (prompt tokens)")
    )
    if len(summary.by_position):
        title = "Accuracy by answer position in the prefix, all shot counts (95% Wilson)"
        console.print(frame_table(accuracy_view(summary.by_position), title))
    console.print(frame_table(throughput_view(summary.throughput), "Throughput by cell"))
    # The gate's own figures (gate.json), so every number beside a verdict is the one that decided it.
    paired = gate_paired_view(result.checks, policy.alpha)
    if len(paired):
        title = (
            f"Paired {policy.metric} accuracy drop vs tolerance {policy.max_accuracy_drop} (the gate's rule: skew-corrected score"
            f" tests, the interval inverts them, Holm over the gate's accuracy checks)"
        )
        console.print(frame_table(paired, title))
    if manifest.decisions:
        console.print(decisions_table(manifest.decisions))
    if len(result.cliffs):
        console.print(cliffs_table(result.cliffs, policy.max_accuracy_drop))
    elif len(paired):
        console.print(f"no cliff: cache-on accuracy does not fall below cache-off by > {policy.max_accuracy_drop} at any length")


def analyze(
    run: Annotated[Path, typer.Argument(help="A run folder (results/<run>).", exists=False)],
    policy: GatePolicyOption = None,
) -> None:
    """Rebuild tables, summary.csv and plots for a run from its records alone (no server), with the paired
    cache on/off table and the prefill-length cliff.

    Exit status (table: evalctl --help): PASS when done; BAD_INPUT for unusable input (missing or corrupt run folder, bad policy).
    """
    from evalctl.analysis.gate import evaluate, load_policy
    from evalctl.report.finish import write_run_summary
    from evalctl.runs import load_run

    loaded = load_run(run)
    rules = load_policy(policy or loaded.manifest.gate_policy).for_run(loaded)  # the run's own policy, as the sweep used
    if not say_if_running(loaded, "the summary files are"):
        write_run_summary(loaded, rules.metric)
    print_run_tables(loaded, evaluate(loaded, rules))
    console.print(f"run folder: {run}")
