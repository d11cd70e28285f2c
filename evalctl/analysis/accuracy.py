"""Accuracy per cell, strict and flexible, with Wilson intervals; errors apart from wrong answers."""

from __future__ import annotations

import pandas as pd

from evalctl.analysis.intervals import wilson_interval
from evalctl.records import CELL_KEYS, Metric


def scored(df: pd.DataFrame) -> pd.DataFrame:
    """Rows that reached an answer (no request error)."""
    return df[df["error"].isna()]


def _accuracy_row(group: pd.DataFrame, metric: Metric) -> pd.Series:
    ok = scored(group)
    n = len(ok)
    row = {"n": n, "errors": int(group["error"].notna().sum()), "invalid": int(ok[f"{metric}_answer"].isna().sum())}
    for metric in ("strict", "flexible"):
        hits = int(ok[f"{metric}_correct"].astype(bool).sum())
        lo, hi = wilson_interval(hits, n)
        row.update({f"{metric}_acc": hits / n if n else float("nan"), f"{metric}_lo": lo, f"{metric}_hi": hi})
    return pd.Series(row)


def accuracy_table(df: pd.DataFrame, by: list[str] | None = None, metric: Metric = "strict") -> pd.DataFrame:
    """One row per group: n scored, errors, invalid, strict/flexible accuracy with 95% Wilson bounds.

    `invalid` counts scored answers with no `metric` answer extracted: the metric the gate judges.
    """
    by = by or CELL_KEYS
    if df.empty:
        return pd.DataFrame(
            columns=[*by, "n", "errors", "invalid", "strict_acc", "strict_lo", "strict_hi", "flexible_acc", "flexible_lo", "flexible_hi"]
        )
    out = df.groupby(by, sort=True, dropna=False).apply(_accuracy_row, metric=metric, include_groups=False).reset_index()
    for col in ("n", "errors", "invalid"):
        out[col] = out[col].astype(int)
    return out
