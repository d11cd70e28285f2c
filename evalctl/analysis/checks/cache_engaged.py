"""The cache engaged (or stayed off) as each cell is labelled; a comparison resting on a cell whose label
failed becomes inconclusive with the reason (`analysis.cache_engagement`)."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from evalctl.analysis.cache_engagement import engagement_table, rests_on_failed
from evalctl.analysis.checks.base import Check, GateCheck, GateInputs
from evalctl.cell import CellKey
from evalctl.runs import Run


def cache_engaged_checks(run: Run) -> tuple[list[Check], pd.DataFrame]:
    """One check per cell with a shared prefix, and the engagement table they come from."""
    table = engagement_table(run.samples, run.manifest)
    checks = [
        Check(
            f"cache {row['cache']} as labelled",
            "cache-engaged",
            "pass" if row["ok"] else "inconclusive",
            row["reason"],
            **CellKey.from_row(row).as_dict(),
            metric="cached / expected tokens",
            value=row["reported_tokens"] / row["expected_tokens"]
            if row["reported_tokens"] is not None and row["expected_tokens"]
            else None,
        )
        for _, row in table.iterrows()
    ]
    return checks, table


class CacheEngaged(GateCheck):
    kind = "cache-engaged"
    order = 50

    def results(self, inputs: GateInputs) -> list[Check]:
        return cache_engaged_checks(inputs.run)[0]

    def revise(self, inputs: GateInputs, earlier: list[Check]) -> list[Check]:
        """The comparisons resting on a cell that failed its cache label: inconclusive, never a pass."""
        table = cache_engaged_checks(inputs.run)[1]
        failed = rests_on_failed(inputs.comparisons, table) if len(table) else {}
        out = []
        for check in earlier:
            why = failed.get((check.comparison, check.cell)) if check.comparison else None
            if why:  # named even on a check already inconclusive: it is the reason nothing could be told
                was = f"was {check.status}: " if check.status != "inconclusive" else ""
                reason = f"rests on a cell whose cache label failed ({why}); {was}{check.reason}"
                check = replace(check, status="inconclusive", reason=reason)
            out.append(check)
        return out


CHECK = CacheEngaged()  # listed in analysis.checks.CHECKS
