"""Accuracy per cell for each of the task's metrics, with Wilson intervals; errors apart from wrong answers."""

from __future__ import annotations

import pandas as pd

from evalctl.analysis.intervals import share_bounds
from evalctl.records import CELL_KEYS, Metric, metric_names, primary_metric


def accuracy_columns(metrics: list[str]) -> list[str]:
    """`<metric>_acc`, `_lo`, `_hi` per metric, in order."""
    return [f"{m}_{part}" for m in metrics for part in ("acc", "lo", "hi")]


def table_metrics(table: pd.DataFrame) -> list[str]:
    """The metrics an accuracy table holds (`<metric>_acc` columns), in the task's order."""
    return [c[: -len("_acc")] for c in table.columns if c.endswith("_acc")]


def _accuracy_row(group: pd.DataFrame, metric: Metric, metrics: list[str]) -> pd.Series:
    ok = group[group["error"].isna()]  # scored: reached an answer
    n = len(ok)
    row = {"n": n, "errors": int(group["error"].notna().sum()), "invalid": int(ok[f"{metric}_answer"].isna().sum())}
    for name in metrics:
        row.update(share_bounds(name, int(ok[f"{name}_correct"].astype(bool).sum()), n))
    return pd.Series(row)


def accuracy_table(df: pd.DataFrame, by: list[str] | None = None, metric: Metric | None = None) -> pd.DataFrame:
    """One row per group: n scored, errors, invalid (scored answers with no `metric` answer extracted: the metric the
    gate judges, default the task's first), each metric's accuracy with 95% Wilson bounds."""
    by = by or CELL_KEYS
    metrics = metric_names(df)
    if df.empty or not metrics:
        return pd.DataFrame(columns=[*by, "n", "errors", "invalid", *accuracy_columns(metrics)])
    metric = primary_metric(df, metric)
    out = df.groupby(by, sort=True, dropna=False).apply(_accuracy_row, metric=metric, metrics=metrics, include_groups=False).reset_index()
    return out.astype({"n": int, "errors": int, "invalid": int})
