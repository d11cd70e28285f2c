"""The sign-off matrix: one coloured cell per (profile, variant, cache, concurrency) x shots, from the gate's checks."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from evalctl.analysis.accuracy import table_metrics
from evalctl.analysis.checks.base import SEVERITY
from evalctl.cell import CellKey
from evalctl.records import NO_METRIC

MATCH_KEYS = CellKey.columns("pass_index")
# Absolute caps judge a cell on its own; their failure is named, not called a regression of the cell.
CAP_KINDS = frozenset({"error_rate", "invalid_rate"})
# Checks of a cell on its own (caps, its cache label, its completeness): passing only these, a cell was
# not judged against anything. It is a reference (cache off, the baseline variant), never a "pass".
OWN_KINDS = CAP_KINDS | {"cache-engaged", "completeness"}


@dataclass(frozen=True)
class SignoffCell:
    status: str  # pass | regression | inconclusive | reference | unchecked (grey) | not gated (grey)
    accuracy: float | None
    reasons: list[str] = field(default_factory=list)
    label: str = ""  # what the cell says: its status, or the name of the failed cap ("invalid rate")

    def __post_init__(self) -> None:
        if not self.label:
            object.__setattr__(self, "label", self.status)


@dataclass(frozen=True)
class SignoffMatrix:
    shots: list[int]
    # (profile, variant, cache, concurrency: None in a table without levels) -> a cell per shot count
    rows: list[tuple[tuple[str, str, str, int | None], list[SignoffCell]]]

    @property
    def levels(self) -> bool:
        """The rows differ in concurrency (a concurrency sweep): the matrix shows it."""
        return len({key[3] for key, _ in self.rows}) > 1


def _matches(check: dict, cell: dict) -> bool:
    """A check applies to a cell when every key it names agrees (an absent key is a wildcard)."""
    return all(check.get(k) is None or cell[k] is None or str(check[k]) == str(cell[k]) for k in MATCH_KEYS)


def signoff_matrix(accuracy: pd.DataFrame, checks: list[dict] | None, metric: str | None = None) -> SignoffMatrix:
    """`accuracy` is `accuracy_table` output; `checks` the gate's, or None when the run is not gated; `metric`
    the accuracy shown (default: the table's first)."""
    column = f"{metric or next(iter(table_metrics(accuracy)), NO_METRIC)}_acc"
    first = accuracy[accuracy["pass_index"] == accuracy["pass_index"].min()] if len(accuracy) else accuracy
    shots = sorted({int(s) for s in first["shots"]})
    rows = []
    # A history catalog's cells have no concurrency (each run's lowest level): rows by the keys the table has.
    row_keys = [k for k in CellKey.columns("shots", "pass_index") if k in first]
    for key, group in first.groupby(row_keys, sort=True):
        profile, variant, cache, level = (*key, None)[:4]
        acc = {int(s): float(a) for s, a in zip(group["shots"], group[column]) if not math.isnan(a)}
        cells = []
        for n in shots:
            value = acc.get(n)
            if checks is None:
                cells.append(SignoffCell("not gated", value))
                continue
            cell = {"profile": profile, "variant": variant, "cache": cache, "shots": n, "concurrency": level}
            here = [c for c in checks if _matches(c, cell)]
            if not here:
                cells.append(SignoffCell("unchecked", value))
                continue
            # Among equally bad checks the accuracy verdict names the cell, before a failed cap.
            worst = min(here, key=lambda c: (SEVERITY.get(c.get("status"), 1), c.get("kind") in OWN_KINDS))
            status = worst.get("status") if worst.get("status") in SEVERITY else "inconclusive"
            reasons = [f"{c.get('name', c.get('kind', 'check'))}: {c.get('status')} - {c.get('reason', '')}" for c in here]
            if status == "pass" and all(c.get("kind") in OWN_KINDS for c in here):
                cells.append(SignoffCell("reference", value, reasons, "reference"))
                continue
            failed_cap = worst.get("kind") in CAP_KINDS and status != "pass"
            judged = f"{status} ({worst['metric']})" if worst.get("metric") and not failed_cap else status  # what the gate used
            cells.append(SignoffCell(status, value, reasons, f"{worst.get('name')} over cap" if failed_cap else judged))
        rows.append(((profile, variant, cache, None if level is None else int(level)), cells))
    return SignoffMatrix(shots, rows)
