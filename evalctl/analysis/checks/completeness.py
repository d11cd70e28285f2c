"""Completeness: a run (and its baseline) that stopped early or is short of questions is not a pass:
the missing cells may be the ones that regress. The planned cells and questions are the plan the
manifest recorded, so a cell that never started counts as missing, not as absent from the comparison.
"""

from __future__ import annotations

import pandas as pd

from evalctl.analysis.checks.base import Check, GateCheck, GateInputs
from evalctl.cell import CellKey
from evalctl.manifest import Manifest
from evalctl.records import CELL_KEYS
from evalctl.runs import Run


def cell_counts(samples: pd.DataFrame, manifest: Manifest) -> pd.DataFrame:
    """Per planned cell (the manifest's `plan`): questions expected and found (distinct doc ids, errors included)."""
    found = samples.groupby(CELL_KEYS)["doc_id"].nunique().rename("found").reset_index()
    plan = pd.DataFrame([{**c.cell.as_dict(), "expected": c.questions} for c in manifest.plan], columns=[*CELL_KEYS, "expected"])
    return plan.merge(found, on=CELL_KEYS, how="left").fillna({"found": 0}).astype({"found": int})


def completeness_checks(run: Run, role: str) -> list[Check]:
    """Not pass when the run stopped early or a planned cell is short of questions."""
    status = run.manifest.status
    checks = []
    if status != "complete":
        why = f"incomplete: run {run.run_id} has status {status!r}, not 'complete'"
        checks.append(Check(f"{role} complete", "completeness", "inconclusive", why))
    if not run.manifest.plan:  # a run folder from before the plan was recorded, or not evalctl's
        return [*checks, Check(f"{role} cells complete", "completeness", "inconclusive", "incomplete: the manifest records no plan")]
    counts = cell_counts(run.samples, run.manifest)
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
