"""Accuracy against prefill length: where along the prompt does accuracy depart?"""

from __future__ import annotations

import numpy as np
import pandas as pd

from evalctl.analysis.accuracy import accuracy_table
from evalctl.cell import CellKey
from evalctl.records import Metric


def length_bins(tokens: pd.Series, n_bins: int = 6) -> np.ndarray:
    """Bin edges over the observed prompt lengths, rounded to 64 tokens for readable labels."""
    values = tokens.dropna().astype(float)
    if values.empty:
        return np.array([0.0, 1.0])
    lo, hi = float(values.min()), float(values.max())
    edges = np.unique(np.round(np.linspace(lo, hi, n_bins + 1) / 64) * 64)
    edges[0] = min(edges[0], lo)
    edges[-1] = max(edges[-1], hi) + 1  # right-open bins must hold the maximum
    return edges if len(edges) > 1 else np.array([lo, hi + 1])


def length_bin(tokens: pd.Series, n_bins: int = 6) -> tuple[np.ndarray, np.ndarray]:
    """Each length's bin over `length_bins`' edges: its lower and upper (exclusive) edge."""
    edges = length_bins(tokens, n_bins)
    idx = np.clip(np.digitize(tokens.astype(float), edges) - 1, 0, len(edges) - 2)
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
