"""`evalctl gate`: judge a run (optionally against a baseline run); its verdict is the exit status (`errors.ExitCode`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evalctl.cli.common import console, fail, say_if_running
from evalctl.cli.options import gate_policy_option
from evalctl.errors import EvalctlError

# `git bisect run` reads 0 as good, 125 as "cannot test this commit: skip", any other code up to
# 127 as bad, and 128 or more as "stop bisecting": a tool failure must not pass for a bad commit.
BISECT_EXIT_CODES = {"pass": 0, "regression": 1, "inconclusive": 125}
BISECT_ABORT = 128
GatePolicyOption = gate_policy_option()


def gate(
    run: Annotated[Path, typer.Argument(help="The run folder to judge (results/<run>).")],
    baseline: Annotated[Path | None, typer.Option("--baseline", "-b", help="A baseline run folder to compare cell by cell.")] = None,
    policy: GatePolicyOption = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Folder for gate.json, gate-junit.xml, gate-summary.md (default: the run folder).")
    ] = None,
    bisect_exit_codes: Annotated[
        bool,
        typer.Option(
            "--bisect-exit-codes",
            help="Exit as `git bisect run` expects: pass 0 (good), regression 1 (bad), inconclusive 125 (skip), "
            "unusable input or any other failure 128 (stop the bisect).",
        ),
    ] = False,
) -> None:
    """Check a run against the gate policy: paired accuracy (cache on vs off, variants, passes, baseline run),
    error/invalid rates, per-request throughput, completeness; the length cliff is reported, not judged.

    A regression is a drop shown to exceed the tolerance (Holm over all accuracy checks); a pass needs every
    cell's drop shown to be within it.

    A run another evalctl is still writing is judged on its rows so far (said on stderr, with who writes it);
    its gate files are then written only with --output.

    Exit status (table: evalctl --help): PASS; REGRESSION; INCONCLUSIVE (too few questions, an incomplete
    run, a drop neither shown beyond nor within the tolerance, a cell with nothing to pair); BAD_INPUT for
    unusable input (missing or corrupt run folder, bad policy, runs without common questions).
    """
    from evalctl.analysis.checks.divergence import FOLLOW
    from evalctl.analysis.checks.divergence import KIND as DIVERGENCE
    from evalctl.analysis.gate import evaluate, load_policy
    from evalctl.analysis.pairing import align_runs
    from evalctl.report.gate_outputs import write_gate_outputs
    from evalctl.report.terminal import STATUS_STYLE, checks_table, cliffs_table, decided_by, evidence_view
    from evalctl.runs import load_run

    try:
        candidate = load_run(run)
        live = say_if_running(candidate, None if output else "gate.json and the other gate files are")
        rules = load_policy(policy or candidate.manifest.gate_policy)
        reference = load_run(baseline) if baseline is not None else None
        if reference is not None:
            align_runs(reference.samples, candidate.samples)  # a baseline with no common question is an error, not a pass
        result = evaluate(candidate, rules, reference)
    except EvalctlError as exc:
        if not bisect_exit_codes:
            raise
        raise fail(str(exc), BISECT_ABORT) from None
    console.print(checks_table(result.checks, f"Gate checks for {result.run}" + (f" vs {result.baseline}" if result.baseline else "")))
    if len(result.cliffs):
        console.print(cliffs_table(result.cliffs, rules.max_accuracy_drop))
    if not (live and output is None):
        files = write_gate_outputs(result, output or run)
        console.print(f"wrote {', '.join(str(f) for f in files)}")
    code = BISECT_EXIT_CODES[result.verdict] if bisect_exit_codes else result.exit_code
    console.print(f"verdict: [{STATUS_STYLE[result.verdict]}]{result.verdict}[/] (exit {code}){decided_by(result.evidence)}")
    if result.evidence and result.evidence.checks:
        console.print(evidence_view(result.evidence))
    if result.verdict == "inconclusive" and any(c.kind == DIVERGENCE and FOLLOW in c.reason for c in result.checks):
        console.print(
            f"next: evalctl sweep --follow {run}  (copies of the returns beyond the spread decide)", highlight=False, soft_wrap=True
        )
    raise typer.Exit(code)
