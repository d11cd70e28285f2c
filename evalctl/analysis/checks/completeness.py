"""Completeness: a run (and its baseline) that stopped early or is short of questions is not a pass:
the missing cells may be the ones that regress. The planned cells and questions are the plan the
manifest recorded (an older manifest: re-expanded from its config), so a cell that never started
counts as missing, not as absent from the comparison.
"""

from __future__ import annotations

import copy
from typing import Any

import pandas as pd
from pydantic import ValidationError

from evalctl.analysis.checks.base import Check, GateCheck, GateInputs
from evalctl.cell import CellKey
from evalctl.config import validated
from evalctl.manifest import Manifest
from evalctl.plan import expand
from evalctl.records import CELL_KEYS
from evalctl.runs import Run

COLUMNS = [*CELL_KEYS, "expected", "found"]


def _drop_fields(data: Any, locs: list[tuple]) -> Any:
    data = copy.deepcopy(data)
    for loc in locs:
        if loc[:1] == ("servers",) and loc[2:3] == ("engine",) and len(loc) > 4:
            loc = loc[:3] + loc[4:]  # the engine's name, the tag of the settings union
        target = data
        for part in loc[:-1]:
            target = target[part]
        target.pop(loc[-1], None)
    return data


def planned_cells(config: dict) -> pd.DataFrame:
    """Cells the manifest's config implies; raises ValueError if the config cannot be read.

    Fields this version does not know (a manifest written by another evalctl version, e.g.
    an engine option) are dropped: this version's plan is built from the fields it knows.
    """
    try:
        resolved = validated(config)
    except ValidationError as first:
        unknown = [e["loc"] for e in first.errors() if e["type"] == "extra_forbidden"]
        try:
            resolved = validated(_drop_fields(config, unknown))
        except ValidationError as exc:
            raise ValueError(
                f"the manifest's config is not a valid sweep config: {exc.error_count()} error(s), first: "
                f"{exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}"
            ) from None
    rows = [c.as_dict() for launch in expand(resolved) for c in launch.cells]
    return pd.DataFrame(rows, columns=CELL_KEYS).assign(limit=resolved.limit)


def cell_counts(samples: pd.DataFrame, manifest: Manifest) -> pd.DataFrame:
    """Per planned cell: questions expected and found (distinct doc ids, errors included).

    Expected is what the plan gave the cell (the manifest's `plan`: a prefix-recall cell at k
    records holds at most k). A manifest from before it: its `questions` per shot count, or
    older still the config's `limit`, capped by the most questions any cell holds (a limit above
    the dataset size is not a shortfall); without a limit, the most any cell holds.
    """
    found = samples.groupby(CELL_KEYS)["doc_id"].nunique().rename("found").reset_index()
    if manifest.plan:
        plan = pd.DataFrame([{**c.cell.as_dict(), "expected": c.questions} for c in manifest.plan])
        return plan.merge(found, on=CELL_KEYS, how="left").fillna({"found": 0}).astype({"found": int})[COLUMNS]
    plan = planned_cells(manifest.config)
    table = plan.merge(found, on=CELL_KEYS, how="left").fillna({"found": 0})
    if manifest.questions:
        table["expected"] = table["shots"].map(manifest.questions).fillna(0).astype(int)
    else:
        most = int(found["found"].max()) if len(found) else 0
        limit = plan["limit"].iloc[0] if len(plan) else None
        table["expected"] = most if limit is None or pd.isna(limit) else min(int(limit), most) if most else int(limit)
    table["found"] = table["found"].astype(int)
    return table[COLUMNS]


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
        counts = cell_counts(run.samples, run.manifest)
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
