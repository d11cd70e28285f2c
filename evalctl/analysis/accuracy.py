"""Accuracy per cell for each of the task's metrics, with Wilson intervals; errors apart from wrong answers. And the
same by prefill length (where along the prompt does accuracy depart?) and, for prefix-recall, by answer position (a
model that forgets its cached prefix loses the records it can no longer see; a fault that garbles the end of the
cached blocks loses the end first: cache on beside cache off per position says which part the server lost)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from evalctl.analysis.intervals import share_bounds
from evalctl.cell import CellKey
from evalctl.records import ANSWER_POSITIONS, CELL_KEYS, Metric, metric_names, primary_metric

BY_POSITION = ["profile", "variant", "concurrency", "pass_index", "answer_position", "cache"]


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


def length_bin(tokens: pd.Series, n_bins: int = 6) -> tuple[np.ndarray, np.ndarray]:
    """Each length's bin, its lower and upper (exclusive) edge; edges over the observed lengths, rounded to 64 tokens
    for readable labels."""
    values = tokens.astype(float)
    lo, hi = (float(values.min()), float(values.max())) if values.notna().any() else (0.0, 0.0)
    edges = np.unique(np.round(np.linspace(lo, hi, n_bins + 1) / 64) * 64)
    edges[0] = min(edges[0], lo)
    edges[-1] = max(edges[-1], hi) + 1  # right-open bins must hold the maximum
    if len(edges) < 2:
        edges = np.array([lo, hi + 1])
    idx = np.clip(np.digitize(values, edges) - 1, 0, len(edges) - 2)
    return edges[idx].astype(int), edges[idx + 1].astype(int)


def accuracy_by_length(df: pd.DataFrame, n_bins: int = 6, metric: Metric | None = None) -> pd.DataFrame:
    """Accuracy per (profile, variant, cache, concurrency, prompt-token bin), over all shot counts and passes."""
    by = CellKey.columns("shots", "pass_index")
    data = df[df["prompt_tokens"].notna()].copy()
    if data.empty:
        return accuracy_table(data.assign(bin=[], bin_lo=[], bin_hi=[]), by=[*by, "bin_lo", "bin_hi"], metric=metric)
    data["bin_lo"], data["bin_hi"] = length_bin(data["prompt_tokens"], n_bins)
    table = accuracy_table(data, by=[*by, "bin_lo", "bin_hi"], metric=metric)
    table.insert(len(by), "bin", [f"{lo}-{hi}" for lo, hi in zip(table["bin_lo"], table["bin_hi"])])
    return table


def accuracy_by_position(df: pd.DataFrame, metric: Metric | None = None) -> pd.DataFrame:
    """Accuracy per (profile, variant, concurrency, pass, answer position, cache mode), over all shot counts, positions
    in prompt order (start, middle, end); rows without one (tasks other than prefix-recall) left out."""
    data = df[df["answer_position"].notna()] if "answer_position" in df else df.iloc[:0].assign(answer_position=[])
    table = accuracy_table(data, by=BY_POSITION, metric=metric)
    order = {p: i for i, p in enumerate(ANSWER_POSITIONS)}
    in_prompt_order = lambda col: col.map(order) if col.name == "answer_position" else col  # noqa: E731
    return table.sort_values(BY_POSITION, key=in_prompt_order, kind="stable").reset_index(drop=True)
