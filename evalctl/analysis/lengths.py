"""Accuracy against prefill length: where along the prompt does accuracy depart?"""

from __future__ import annotations

import numpy as np
import pandas as pd

from evalctl.analysis.accuracy import accuracy_table
from evalctl.cell import CellKey
from evalctl.records import Metric


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
