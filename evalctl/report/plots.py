"""Matplotlib plots of accuracy (with Wilson intervals), cache on vs off."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; no display on servers and CI
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.font_manager import FontProperties  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from evalctl.analysis.accuracy import table_metrics  # noqa: E402
from evalctl.cell import CellKey  # noqa: E402
from evalctl.fsio import atomic_path  # noqa: E402
from evalctl.records import ANSWER_POSITIONS, NO_METRIC  # noqa: E402

SERIES = CellKey.columns("shots", "pass_index")


# Average glyph width of matplotlib's default font, in ems: how many characters a line of a width holds.
GLYPH_EMS = 0.6


def fitted(text: str, width_in: float, fontsize: float) -> str:
    """`text` wrapped at spaces to lines that fit `width_in` inches: matplotlib draws a title on one line
    and cuts it at the figure's edges (a dashboard's long configuration name lost both ends)."""
    return "\n".join(textwrap.wrap(text, max(20, int(width_in * 72 / (fontsize * GLYPH_EMS))), break_on_hyphens=False)) or text


def points(rc_key: str) -> float:
    """A font size setting of matplotlib's (a number or a name such as "large") in points."""
    return FontProperties(size=matplotlib.rcParams[rc_key]).get_size_in_points()


def set_title(ax, text: str) -> None:
    """The axes' title, wrapped to the axes' width."""
    ax.set_title(fitted(text, ax.get_position().width * ax.figure.get_figwidth(), points("axes.titlesize")))


def legend(ax) -> None:
    """The legend beside the axes, never over a point (inside, its box over many series hid some of them)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)


DODGE = 0.008  # sideways step between lines at one x, as a share of the x range: equal values (a run and its baseline) stay visible


def dodged(x: pd.Series, span: Any, place: tuple[int, int]) -> pd.Series:
    """`x` of line `place` = (index, count) moved sideways by its share of `span` (the plot's x range; a
    Timedelta for dates): a line drawn exactly over another hid it, though the legend named it."""
    index, count = place
    return x + span * (DODGE * (index - (count - 1) / 2))


def first_passes(table: pd.DataFrame) -> pd.DataFrame:
    """The table's rows of its first pass."""
    return table[table["pass_index"] == table["pass_index"].min()] if len(table) else table


def _span(x: pd.Series, least: Any = 1.0) -> Any:
    """The plot's x range, at least `least` (one x value has none)."""
    return max(x.max() - x.min(), least) if len(x) else least


def _accuracy_lines(ax, table: pd.DataFrame, metric: str, x: Callable, span: Any, order: str | None = None) -> None:
    """One accuracy line per series at `x(rows)` (sorted by `order`), dodged within `span` (`dodged`); a line with no
    value to draw is left out, legend included."""
    drawn = [(key, group) for key, group in table.groupby(SERIES, sort=True) if group[f"{metric}_acc"].notna().any()]
    levels = table["concurrency"].nunique() > 1
    for i, ((profile, variant, cache, level), group) in enumerate(drawn):
        label = series_label(table, profile, variant, f"cache {cache} conc {level}" if levels else f"cache {cache}")
        group = group.sort_values(order) if order else group
        y = group[f"{metric}_acc"]
        yerr = [(y - group[f"{metric}_lo"]).clip(lower=0), (group[f"{metric}_hi"] - y).clip(lower=0)]
        ax.errorbar(
            dodged(pd.Series(x(group), dtype=float), span, (i, len(drawn))), y, yerr=yerr, capsize=3, label=label, **_line_style(cache)
        )


def series_label(table: pd.DataFrame, profile: str, variant: str, rest: str) -> str:
    """A line's legend label: the profile only when the plot has several (one long name in every
    label squeezed the axes to a sliver), the variant unless it is the default."""
    named = [profile] if table["profile"].nunique() > 1 else []
    named += [variant] if variant != "default" else []
    return f"{'/'.join(named)} {rest}".strip()


def _style_accuracy_axes(ax, xlabel: str, title: str, show_legend: bool, metric: str) -> None:
    ax.set(xlabel=xlabel, ylabel=f"accuracy ({metric}, 95% Wilson)", ylim=(-0.02, 1.02))
    set_title(ax, title)
    ax.grid(alpha=0.3)
    if show_legend:
        legend(ax)


def save_figure(fig, path: Path) -> Path:
    fig.tight_layout()
    with atomic_path(path) as tmp:  # the format from the target's name: the temporary one ends in .tmp
        # "tight": the image grows to hold the legend below the axes and a wrapped title
        fig.savefig(tmp, dpi=120, format=path.suffix.lstrip(".") or "png", bbox_inches="tight")
    plt.close(fig)
    return path


def _shown(table: pd.DataFrame, metric: str | None) -> str:
    """The metric a plot shows: the one named, else the table's first (the task's primary)."""
    return metric or next(iter(table_metrics(table)), NO_METRIC)


def accuracy_vs_shots(table: pd.DataFrame, path: Path, title: str, metric: str | None = None) -> Path:
    metric = _shown(table, metric)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    first_pass = first_passes(table)
    _accuracy_lines(ax, first_pass, metric, lambda rows: rows["shots"], _span(first_pass["shots"]), "shots")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))  # one shot count (a concurrency sweep) read 3.98, 3.99, ...
    _style_accuracy_axes(ax, "few-shot examples", title, len(first_pass) > 0, metric)
    return save_figure(fig, path)


def _draw_prefill(ax, table: pd.DataFrame, chunked_prefill: int | None, metric: str) -> None:
    span = _span(pd.concat([table["bin_lo"], table["bin_hi"]]))
    _accuracy_lines(ax, table, metric, lambda rows: (rows["bin_lo"] + rows["bin_hi"]) / 2, span, "bin_lo")
    if len(table):  # the view spans the bins, not only their centres: one bin's axis read 63.36, 63.40, ...
        ax.update_datalim([(table["bin_lo"].min(), 0.5), (table["bin_hi"].max(), 0.5)])
        ax.autoscale_view()
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    if chunked_prefill:
        ax.axvline(chunked_prefill, color="grey", linestyle=":", label=f"chunked prefill {chunked_prefill}")


def accuracy_vs_prefill(table: pd.DataFrame, path: Path, title: str, chunked_prefill: int | None = None, metric: str | None = None) -> Path:
    metric = _shown(table, metric)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    _draw_prefill(ax, table, chunked_prefill, metric)
    _style_accuracy_axes(ax, "prompt tokens (bin centre)", title, len(table) > 0, metric)
    return save_figure(fig, path)


def accuracy_by_position(
    positions: pd.DataFrame, by_length: pd.DataFrame, path: Path, title: str, chunked_prefill: int | None = None, metric: str | None = None
) -> Path:
    """prefix-recall: accuracy by the answer's third of the prefix, cache on vs off, beside accuracy vs prefill length."""
    metric = _shown(positions, metric)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    first_pass = first_passes(positions)
    index = {p: i for i, p in enumerate(ANSWER_POSITIONS)}
    _accuracy_lines(left, first_pass, metric, lambda rows: rows["answer_position"].map(index), float(len(index)))
    left.set_xticks(range(len(ANSWER_POSITIONS)), ANSWER_POSITIONS)
    _style_accuracy_axes(left, "where the answer sits in the prefix", "by answer position", len(first_pass) > 0, metric)
    _draw_prefill(right, by_length, chunked_prefill, metric)
    _style_accuracy_axes(right, "prompt tokens (bin centre)", "by prefill length", False, metric)
    fig.suptitle(fitted(title, fig.get_figwidth(), points("figure.titlesize")))
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
    """A metric per run date, one line per (profile, variant, cache, shots); intervals where known. `verdicts`
    (run date -> verdict) marks each run with a faint line in its verdict's colour."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for when, verdict in (verdicts or {}).items():
        if verdict in VERDICT_COLOURS:
            ax.axvline(when.tz_localize(None), color=VERDICT_COLOURS[verdict], alpha=0.3, linewidth=4, zorder=0)
    # A series with nothing to draw is left out, legend included.
    series = table.dropna(subset=["value"]).groupby(CellKey.columns("concurrency", "pass_index"))  # history: the lowest level
    drawn = [(key, group.sort_values("created_at")) for key, group in series]
    span = _span(table["created_at"].dt.tz_localize(None), pd.Timedelta(days=2)) if len(table) else pd.Timedelta(days=2)
    for i, ((profile, variant, cache, shots), group) in enumerate(drawn):
        x, y = group["created_at"].dt.tz_localize(None), group["value"]
        yerr = [(y - group["lo"]).clip(lower=0), (group["hi"] - y).clip(lower=0)] if group["lo"].notna().any() else None
        label = series_label(table, profile, variant, f"cache {cache} {shots}-shot")
        ax.errorbar(dodged(x, span, (i, len(drawn))), y, yerr=yerr, marker="o", capsize=3, label=label)
    ax.set(xlabel="run date (UTC)", ylabel=ylabel)
    set_title(ax, title)
    if len(table) and table["created_at"].nunique() == 1:  # one date: a day either side, not matplotlib's years
        day = table["created_at"].iloc[0].tz_localize(None)
        ax.set_xlim(day - pd.Timedelta(days=1), day + pd.Timedelta(days=1))
    if "accuracy" in ylabel:
        ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    legend(ax)
    fig.autofmt_xdate()
    return save_figure(fig, path)


LOAD_SERIES = ["profile", "variant", "cache"]  # one line per build and cache mode across load levels


def _at_longest_prefix(tp: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The throughput table's first pass at its most shots (speed falls with the prefix: one line per build, not per shot count)."""
    if not len(tp):
        return tp, ""
    first = first_passes(tp)
    shots = int(first["shots"].max())
    return first[first["shots"] == shots], f"{shots}-shot"


def _load_lines(tp: pd.DataFrame, along: str = "concurrency"):
    """(label, cache, rows in `along`'s order) per line of a load plot; lines with no rate left out."""
    drawn = tp.dropna(subset=["output_tokens_per_s"])
    for (profile, variant, cache), group in drawn.groupby(LOAD_SERIES, sort=True):
        yield series_label(drawn, profile, variant, f"cache {cache}"), cache, group.sort_values(along)


def _line_style(cache: str) -> dict:
    return {"marker": "o" if cache == "on" else "s", "linestyle": "-" if cache == "on" else "--"}


def throughput_vs_concurrency(tp: pd.DataFrame, path: Path, title: str) -> Path:
    """Aggregate output tokens/s against the requests in flight, one line per build and cache mode. A run of one
    level and several lengths (the default sweep) draws it against the prefill length instead, the axis of the
    accuracy plot beside it: one point per line would say nothing."""
    by_length = bool(len(tp)) and tp["concurrency"].nunique() == 1 and tp["shots"].nunique() > 1
    if by_length:
        tp = first_passes(tp)
        x, xlabel = "mean_prompt_tokens", "prompt tokens (cell mean)"
        subtitle = f"prefill length, concurrency {int(tp['concurrency'].iloc[0])}"
    else:
        tp, cell = _at_longest_prefix(tp)
        x, xlabel, subtitle = "concurrency", "concurrency (requests in flight)", f"load, {cell}"
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, cache, group in _load_lines(tp, along=x):
        ax.plot(group[x], group["output_tokens_per_s"], label=label, **_line_style(cache))
    if not by_length:
        ax.set_xscale("log", base=2)
        levels = sorted({int(c) for c in tp["concurrency"]}) if len(tp) else []
        ax.set_xticks(levels, [str(c) for c in levels])
    ax.set(xlabel=xlabel, ylabel="output tokens/s, all requests")
    set_title(ax, f"{title}\nthroughput by {subtitle}")
    ax.grid(alpha=0.3)
    legend(ax)
    return save_figure(fig, path)


def pareto(tp: pd.DataFrame, path: Path, title: str) -> Path:
    """Tokens/s each user sees (a request's median output rate) against the server's total, each point a load level:
    up is more work done, right is faster for each user."""
    tp, cell = _at_longest_prefix(tp)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, cache, group in _load_lines(tp):
        ax.plot(group["user_tokens_per_s"], group["output_tokens_per_s"], label=label, **_line_style(cache))
        for x, y, c in zip(group["user_tokens_per_s"], group["output_tokens_per_s"], group["concurrency"]):
            ax.annotate(f"c={int(c)}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set(xlabel="output tokens/s per user (median request)", ylabel="output tokens/s, all requests")
    set_title(ax, f"{title}\nper-user against total, {cell}")
    ax.grid(alpha=0.3)
    legend(ax)
    return save_figure(fig, path)
