"""Matplotlib plots of accuracy (with Wilson intervals), cache on vs off."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display on servers and CI
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from evalctl.analysis.accuracy import table_metrics  # noqa: E402
from evalctl.cell import CellKey  # noqa: E402
from evalctl.fsio import atomic_path  # noqa: E402
from evalctl.records import ANSWER_POSITIONS, NO_METRIC  # noqa: E402

SERIES = CellKey.columns("shots", "pass_index")


def _series(table: pd.DataFrame):
    for key, group in table.groupby(SERIES, sort=True):
        profile, variant, cache = key
        label = f"{profile}/{variant} cache {cache}" if variant != "default" else f"{profile} cache {cache}"
        yield label, cache, group


def _errorbar(ax, x, group: pd.DataFrame, label: str, cache: str, metric: str) -> None:
    y = group[f"{metric}_acc"]
    yerr = [(y - group[f"{metric}_lo"]).clip(lower=0), (group[f"{metric}_hi"] - y).clip(lower=0)]
    ax.errorbar(x, y, yerr=yerr, marker="o" if cache == "on" else "s", linestyle="-" if cache == "on" else "--", capsize=3, label=label)


def _style_accuracy_axes(ax, xlabel: str, title: str, legend: bool, metric: str) -> None:
    ax.set(xlabel=xlabel, ylabel=f"accuracy ({metric}, 95% Wilson)", title=title, ylim=(-0.02, 1.02))
    ax.grid(alpha=0.3)
    if legend:
        ax.legend(fontsize=8)


def save_figure(fig, path: Path) -> Path:
    fig.tight_layout()
    with atomic_path(path) as tmp:  # the format from the target's name: the temporary one ends in .tmp
        fig.savefig(tmp, dpi=120, format=path.suffix.lstrip(".") or "png")
    plt.close(fig)
    return path


def _shown(table: pd.DataFrame, metric: str | None) -> str:
    """The metric a plot shows: the one named, else the table's first (the task's primary)."""
    return metric or next(iter(table_metrics(table)), NO_METRIC)


def _finish_accuracy_plot(fig, ax, path: Path, xlabel: str, title: str, legend: bool, metric: str) -> Path:
    _style_accuracy_axes(ax, xlabel, title, legend, metric)
    return save_figure(fig, path)


def accuracy_vs_shots(table: pd.DataFrame, path: Path, title: str, metric: str | None = None) -> Path:
    metric = _shown(table, metric)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    first_pass = table[table["pass_index"] == table["pass_index"].min()] if len(table) else table
    for label, cache, group in _series(first_pass):
        group = group.sort_values("shots")
        _errorbar(ax, group["shots"], group, label, cache, metric)
    return _finish_accuracy_plot(fig, ax, path, "few-shot examples", title, len(first_pass) > 0, metric)


def _draw_prefill(ax, table: pd.DataFrame, chunked_prefill: int | None, metric: str) -> None:
    for label, cache, group in _series(table):
        group = group.sort_values("bin_lo")
        _errorbar(ax, (group["bin_lo"] + group["bin_hi"]) / 2, group, label, cache, metric)
    if chunked_prefill:
        ax.axvline(chunked_prefill, color="grey", linestyle=":", label=f"chunked prefill {chunked_prefill}")


def accuracy_vs_prefill(table: pd.DataFrame, path: Path, title: str, chunked_prefill: int | None = None, metric: str | None = None) -> Path:
    metric = _shown(table, metric)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    _draw_prefill(ax, table, chunked_prefill, metric)
    return _finish_accuracy_plot(fig, ax, path, "prompt tokens (bin centre)", title, len(table) > 0, metric)


def accuracy_by_position(
    positions: pd.DataFrame, by_length: pd.DataFrame, path: Path, title: str, chunked_prefill: int | None = None, metric: str | None = None
) -> Path:
    """prefix-recall: accuracy by the answer's third of the prefix, cache on vs off, beside accuracy vs prefill length."""
    metric = _shown(positions, metric)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    first_pass = positions[positions["pass_index"] == positions["pass_index"].min()] if len(positions) else positions
    index = {p: i for i, p in enumerate(ANSWER_POSITIONS)}
    for label, cache, group in _series(first_pass):
        _errorbar(left, group["answer_position"].map(index), group, label, cache, metric)
    left.set_xticks(range(len(ANSWER_POSITIONS)), ANSWER_POSITIONS)
    _style_accuracy_axes(left, "where the answer sits in the prefix", "by answer position", len(first_pass) > 0, metric)
    _draw_prefill(right, by_length, chunked_prefill, metric)
    _style_accuracy_axes(right, "prompt tokens (bin centre)", "by prefill length", False, metric)
    fig.suptitle(title)
    return save_figure(fig, path)


# Background band per run in a trend plot, by the run's gate verdict.
VERDICT_COLOURS = {"pass": "#2e7d32", "regression": "#c62828", "inconclusive": "#9e9e9e", "incomplete": "#ef6c00"}


def history_trend(
    table: pd.DataFrame,
    path: Path,
    title: str,
    ylabel: str = "accuracy (95% Wilson)",
    verdicts: dict[pd.Timestamp, str] | None = None,
) -> Path:
    """A metric per run date, one line per (profile, variant, cache, shots); intervals where known.

    `verdicts` (run date -> verdict) marks each run with a faint line in its verdict's colour.
    """
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for when, verdict in (verdicts or {}).items():
        if verdict in VERDICT_COLOURS:
            ax.axvline(when.tz_localize(None), color=VERDICT_COLOURS[verdict], alpha=0.3, linewidth=4, zorder=0)
    for key, group in table.groupby(CellKey.columns("pass_index"), sort=True):
        profile, variant, cache, shots = key
        group = group.sort_values("created_at")
        x, y = group["created_at"].dt.tz_localize(None), group["value"]
        yerr = None
        if group["lo"].notna().any():
            yerr = [(y - group["lo"]).clip(lower=0), (group["hi"] - y).clip(lower=0)]
        name = f"{profile}/{variant}" if variant != "default" else profile
        ax.errorbar(x, y, yerr=yerr, marker="o", capsize=3, label=f"{name} cache {cache} {shots}-shot")
    ax.set(xlabel="run date (UTC)", ylabel=ylabel, title=title)
    if len(table) and table["created_at"].nunique() == 1:  # one date: a day either side, not matplotlib's years
        day = table["created_at"].iloc[0].tz_localize(None)
        ax.set_xlim(day - pd.Timedelta(days=1), day + pd.Timedelta(days=1))
    if "accuracy" in ylabel:
        ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    if len(table):
        ax.legend(fontsize=8, loc="best" if len(table) < 500 else "upper left")  # "best" is slow over long histories
    fig.autofmt_xdate()
    return save_figure(fig, path)
