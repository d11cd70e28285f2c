"""Completeness: a run (and its baseline) that stopped early or is short of questions is not a pass."""

from __future__ import annotations

from evalctl.analysis.checks.base import Check, GateCheck, GateInputs
from evalctl.analysis.completeness import cell_counts
from evalctl.cell import CellKey
from evalctl.runs import Run


def completeness_checks(run: Run, role: str) -> list[Check]:
    """Not pass when the run stopped early or a planned cell is short of questions."""
    status = run.manifest.status
    checks = []
    if status != "complete":
        checks.append(
            Check(
                f"{role} complete",
                "completeness",
                "inconclusive",
                f"incomplete: run {run.run_id} has status {status!r}, not 'complete'",
            )
        )
    try:
        counts = cell_counts(run.samples, run.manifest.config, run.manifest.questions)
    except ValueError as exc:
        return [*checks, Check(f"{role} cells complete", "completeness", "inconclusive", f"incomplete: cannot tell which cells: {exc}")]
    # A cell the sequential gate decided early holds the questions up to its look: complete.
    stopped = {d.cell for d in run.manifest.decisions if d.saved}
    short = counts[counts["found"] < counts["expected"]]
    for _, row in short.iterrows():
        if (cell := CellKey.from_row(row)) in stopped:
            continue
        checks.append(
            Check(
                f"{role} cell complete",
                "completeness",
                "inconclusive",
                f"incomplete: {row['found']} of {row['expected']} questions recorded",
                **cell.as_dict(),
                metric="questions",
                value=float(row["found"]),
                threshold=float(row["expected"]),
                n=int(row["found"]),
            )
        )
    if not checks:
        decided = f" ({len(stopped)} stopped early, decided)" if stopped else ""
        done = f"all {len(counts)} planned cells have every question{decided}"
        checks.append(Check(f"{role} complete", "completeness", "pass", done))
    return checks


class Completeness(GateCheck):
    kind = "completeness"
    order = 10

    def results(self, inputs: GateInputs) -> list[Check]:
        checks = completeness_checks(inputs.run, "run")
        return checks + (completeness_checks(inputs.baseline, "baseline") if inputs.baseline is not None else [])


CHECK = Completeness()  # listed in analysis.checks.CHECKS
