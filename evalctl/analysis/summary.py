"""A run's summary tables: accuracy per cell, by prefill length and (prefix-recall) by answer position; throughput per cell.
And two runs side by side (`evalctl compare`)."""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import pandas as pd

from evalctl.analysis.accuracy import accuracy_by_length, accuracy_by_position, accuracy_table
from evalctl.analysis.flips import flipped_questions
from evalctl.analysis.multiple import holm
from evalctl.analysis.pairing import align_runs, between_runs, paired_table
from evalctl.analysis.settings import settings_diff_runs
from evalctl.analysis.throughput import throughput_ratios, throughput_table
from evalctl.records import CELL_KEYS, Metric, primary_metric
from evalctl.runs import Run
from evalctl.schema import SloConfig


@dataclass(frozen=True)
class RunSummary:
    accuracy: pd.DataFrame
    by_length: pd.DataFrame
    throughput: pd.DataFrame
    by_position: pd.DataFrame  # prefix-recall only; empty for other tasks
    metric: str  # the metric judged (`<metric>_acc` in the tables), which the `invalid` counts follow


def summarize(samples: pd.DataFrame, metric: Metric | None = None, slo: SloConfig | None = None) -> RunSummary:
    """The tables; `metric` is the one the gate judges (default: the task's first), which the `invalid` counts follow;
    `slo` the latency objective goodput counts."""
    metric = primary_metric(samples, metric)
    return RunSummary(
        accuracy_table(samples, metric=metric),
        accuracy_by_length(samples, metric=metric),
        throughput_table(samples, slo=slo),
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
        stated = run.config.get("slo")  # the latency objective goodput counts
        computed[metric] = summarize(run.samples, metric, SloConfig.model_validate(stated) if stated else None)
    return computed[metric]


@dataclass(frozen=True)
class RunComparison:
    """A candidate run beside its baseline, cell by cell on their common questions."""

    metric: str
    paired: pd.DataFrame  # accuracy, the paired drop, exact McNemar p (Holm across cells)
    throughput: pd.DataFrame  # candidate / baseline ratios
    settings: pd.DataFrame  # the resolved server settings that differ
    flipped: pd.DataFrame  # every question whose score changed, with full responses
    pairs: int  # paired records


def compare_runs(baseline: Run, candidate: Run, metric: Metric | None = None) -> RunComparison:
    """`evalctl compare`'s tables; runs that share no question raise `BadInput`."""
    pairs = align_runs(baseline.samples, candidate.samples)
    metric = baseline.metric(candidate.metric(metric))
    ratios = throughput_ratios([between_runs(throughput_table(baseline.samples), throughput_table(candidate.samples))])
    paired = paired_table([between_runs(baseline.samples, candidate.samples)], metric)
    return RunComparison(
        metric,
        paired.assign(p_two_sided_holm=holm(paired["p_two_sided"].to_numpy(dtype=float))),
        ratios,
        settings_diff_runs(baseline.manifest, candidate.manifest),
        flipped_questions(baseline.samples, candidate.samples, CELL_KEYS, metric),
        len(pairs),
    )
