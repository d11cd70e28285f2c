"""A run's summary tables: accuracy per cell, by prefill length and (prefix-recall) by answer position; throughput per cell."""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import pandas as pd

from evalctl.analysis.accuracy import accuracy_table
from evalctl.analysis.lengths import accuracy_by_length
from evalctl.analysis.positions import accuracy_by_position
from evalctl.analysis.throughput import throughput_table
from evalctl.records import Metric, primary_metric
from evalctl.runs import Run


@dataclass(frozen=True)
class RunSummary:
    accuracy: pd.DataFrame
    by_length: pd.DataFrame
    throughput: pd.DataFrame
    by_position: pd.DataFrame  # prefix-recall only; empty for other tasks
    metric: str  # the metric judged (`<metric>_acc` in the tables), which the `invalid` counts follow


def summarize(samples: pd.DataFrame, metric: Metric | None = None) -> RunSummary:
    """The tables; `metric` is the one the gate judges (default: the task's first), which the `invalid` counts follow."""
    metric = primary_metric(samples, metric)
    return RunSummary(
        accuracy_table(samples, metric=metric),
        accuracy_by_length(samples, metric=metric),
        throughput_table(samples),
        accuracy_by_position(samples, metric=metric),
        metric,
    )


# Per loaded run and metric: a sweep's tables, gate and report share one computation.
_SUMMARIES: weakref.WeakKeyDictionary[Run, dict[str, RunSummary]] = weakref.WeakKeyDictionary()


def run_summary(run: Run, metric: Metric | None = None) -> RunSummary:
    """`summarize` of a loaded run's samples, computed once per run and metric (default: the task's first)."""
    metric = run.metric(metric)
    computed = _SUMMARIES.setdefault(run, {})
    if metric not in computed:
        computed[metric] = summarize(run.samples, metric)
    return computed[metric]
