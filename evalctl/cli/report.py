"""`evalctl report`: the self-contained HTML sign-off report of one run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evalctl.cli.common import console, fail, say_if_running
from evalctl.cli.options import gate_policy_option

GatePolicyOption = gate_policy_option(", for a run with no gate.json yet")


def report(
    run: Annotated[Path, typer.Argument(help="A run folder (results/<run>).")],
    baseline: Annotated[Path | None, typer.Option(help="A baseline run folder to compare against.")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="HTML file to write; default: <run>/report.html.")] = None,
    policy: GatePolicyOption = None,
    attach_guidellm: Annotated[
        Path | None,
        typer.Option(
            help="A guidellm benchmark report (JSON or YAML, guidellm 0.8) of the same server, kept in the run folder and shown "
            "beside the run's throughput from now on; needs evalctl's 'guidellm' extra.",
            exists=True,
            dir_okay=False,
        ),
    ] = None,
) -> None:
    """Write one HTML file (plots embedded, no network needed): header, gate verdict and sign-off matrix,
    plots, throughput ratios, probes, flipped questions, server command lines and log links.

    The gate verdict is the run's gate.json when `evalctl gate` wrote one; otherwise the gate is
    evaluated now (against --baseline when given) for the report only.
    """
    from evalctl.analysis.gate import evaluate, load_policy
    from evalctl.analysis.gate_document import GateDocument, read_gate
    from evalctl.report import guidellm
    from evalctl.report.html import write_report
    from evalctl.runs import load_run

    out = output or run / "report.html"
    loaded, reference = load_run(run), load_run(baseline) if baseline else None
    if say_if_running(loaded) and output is None:
        raise fail(
            f"{run} is still being written: its report.html is the writer's to write; give --output FILE for a report of the rows so far"
        )
    if attach_guidellm is not None:
        if loaded.live:
            raise fail(f"{run} is still being written: attach the guidellm report once its sweep is done")
        console.print(f"attached: {guidellm.attach(run, attach_guidellm)}")
    gate = read_gate(run) or GateDocument.of(evaluate(loaded, load_policy(policy or loaded.manifest.gate_policy), reference))
    write_report(loaded, out, baseline=reference, gate=gate)
    console.print(f"report: {out}")
