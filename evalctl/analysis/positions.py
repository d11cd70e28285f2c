"""Accuracy by where the answer sits in the prefix (prefix-recall): start, middle or end.

A model that forgets its cached prefix loses the records it can no longer see; a cache
fault that garbles the end of the cached blocks loses the end first. Cache on beside
cache off per position says which part of the prefix the server lost.
"""

from __future__ import annotations

import pandas as pd

from evalctl.analysis.accuracy import accuracy_table
from evalctl.records import ANSWER_POSITIONS, Metric

BY = ["profile", "variant", "concurrency", "pass_index", "answer_position", "cache"]


def accuracy_by_position(df: pd.DataFrame, metric: Metric | None = None) -> pd.DataFrame:
    """Accuracy per (profile, variant, concurrency, pass, answer position, cache mode), over all shot counts, positions
    in prompt order (start, middle, end); rows without one (tasks other than prefix-recall) left out."""
    data = df[df["answer_position"].notna()] if "answer_position" in df else df.iloc[:0].assign(answer_position=[])
    table = accuracy_table(data, by=BY, metric=metric)
    order = {p: i for i, p in enumerate(ANSWER_POSITIONS)}
    in_prompt_order = lambda col: col.map(order) if col.name == "answer_position" else col  # noqa: E731
    return table.sort_values(BY, key=in_prompt_order, kind="stable").reset_index(drop=True)
