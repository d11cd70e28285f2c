"""Rich tables for the terminal, rendered from analysis DataFrames."""

from __future__ import annotations

import math

import pandas as pd
from rich.table import Table


def _fmt(value: object, column: str) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        if column.endswith(("_acc", "_lo", "_hi", "ratio")):
            return f"{value:.3f}"
        return f"{value:.2f}"
    return str(value)


def frame_table(df: pd.DataFrame, title: str, columns: list[str] | None = None) -> Table:
    columns = columns or list(df.columns)
    table = Table(title=title, title_justify="left", header_style="bold")
    for col in columns:
        table.add_column(col, justify="left" if df[col].dtype == object else "right")
    for row in df[columns].itertuples(index=False):
        table.add_row(*(_fmt(v, c) for v, c in zip(row, columns)))
    return table


def _drop_constant_keys(df: pd.DataFrame) -> pd.DataFrame:
    """Hide key columns that say nothing in this run (one variant, one pass)."""
    drop = [c for c, trivial in (("variant", "default"), ("pass_index", 1)) if c in df and set(df[c]) <= {trivial}]
    return df.drop(columns=drop)


def accuracy_view(acc: pd.DataFrame) -> pd.DataFrame:
    """Accuracy with its interval in one readable column."""
    view = _drop_constant_keys(acc)
    for metric in ("strict", "flexible"):
        view[metric] = [
            "-" if math.isnan(a) else f"{a:.2f} [{lo:.2f},{hi:.2f}]"
            for a, lo, hi in zip(view[f"{metric}_acc"], view[f"{metric}_lo"], view[f"{metric}_hi"])
        ]
    keep = [c for c in view.columns if not c.startswith(("strict_", "flexible_"))]
    return view[keep]


THROUGHPUT_COLUMNS = {
    "requests_per_s": "req/s",
    "output_tokens_per_s": "out tok/s",
    "latency_p50_s": "p50 s",
    "latency_p90_s": "p90 s",
    "latency_p99_s": "p99 s",
    "mean_prompt_tokens": "prompt tok",
    "cache_hit_ratio": "hit ratio",
}


def throughput_view(tp: pd.DataFrame) -> pd.DataFrame:
    keys = [c for c in ("profile", "variant", "cache", "shots", "pass_index") if c in tp]
    return _drop_constant_keys(tp[keys + list(THROUGHPUT_COLUMNS)]).rename(columns=THROUGHPUT_COLUMNS)
