"""Rich tables for the terminal, rendered from analysis DataFrames."""

from __future__ import annotations

import math
from collections import Counter
from typing import TYPE_CHECKING

import pandas as pd
from rich import box
from rich.table import Table
from rich.text import Text

from evalctl.analysis.accuracy import accuracy_columns, table_metrics
from evalctl.records import CELL_KEYS

if TYPE_CHECKING:
    from evalctl.analysis.gate import Check, GateResult
    from evalctl.manifest import CellDecision


def _fmt(value: object, column: str) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        if column.endswith(("_acc", "_lo", "_hi", "ratio")):
            return f"{value:.3f}"
        return f"{value:.2f}"
    return str(value)


class _TitleAbove(Table):
    """Rich folds a title into the table's width, one word a line over a narrow table; this prints it
    on its own line above, where the terminal wraps it."""

    def __rich_console__(self, console, options):
        title, self.title = self.title, None
        try:
            if title:
                yield Text(str(title), style="table.title")
            yield from super().__rich_console__(console, options)
        finally:
            self.title = title


def narrow_table(title: str) -> Table:
    """A table that reads at 80 columns: no outer edge or vertical rules, one space between columns."""
    return _TitleAbove(title=title, header_style="bold", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)


def add_column(table: Table, header: str, cells: list[str], numeric: bool = False) -> None:
    """Headers wrap at spaces but are never cut; numbers are never cut; text folds."""
    widest = max((len(word) for word in header.split()), default=1)
    if numeric:
        widest = max([widest, *(len(c) for c in cells)])
    table.add_column(header, justify="right" if numeric else "left", min_width=widest, overflow="fold")


def frame_table(df: pd.DataFrame, title: str, columns: list[str] | None = None) -> Table:
    columns = columns or list(df.columns)
    rows = [[_fmt(v, c) for v, c in zip(row, columns)] for row in df[columns].itertuples(index=False)]
    table = narrow_table(title)
    for i, col in enumerate(columns):
        add_column(table, col, [r[i] for r in rows], numeric=df[col].dtype != object)
    for row in rows:
        table.add_row(*row)
    return table


def _drop_constant_keys(df: pd.DataFrame) -> pd.DataFrame:
    """Hide key columns that say nothing in this run (one variant, one pass, one comparison)."""
    drop = [c for c, trivial in (("variant", "default"), ("pass_index", 1)) if c in df and set(df[c]) <= {trivial}]
    if "comparison" in df and df["comparison"].nunique() <= 1:
        drop.append("comparison")
    return df.drop(columns=drop)


def accuracy_view(acc: pd.DataFrame) -> pd.DataFrame:
    """Accuracy with its interval in one readable column."""
    view = _drop_constant_keys(acc)
    metrics = table_metrics(acc)
    for metric in metrics:
        view[metric] = [
            "-" if math.isnan(a) else f"{a:.2f} [{lo:.2f},{hi:.2f}]"
            for a, lo, hi in zip(view[f"{metric}_acc"], view[f"{metric}_lo"], view[f"{metric}_hi"])
        ]
    return view.drop(columns=accuracy_columns(metrics))


THROUGHPUT_COLUMNS = {
    "requests_per_s": "req/s",
    "output_tokens_per_s": "out tok/s",
    "latency_p50_s": "p50 s",
    "latency_p90_s": "p90 s",
    "latency_p99_s": "p99 s",
    "ttft_p50_s": "ttft p50 s",
    "ttft_p90_s": "ttft p90 s",
    "mean_prompt_tokens": "prompt tok",
    "cache_hit_ratio": "hit ratio",
}


def throughput_view(tp: pd.DataFrame) -> pd.DataFrame:
    keys = [c for c in CELL_KEYS if c in tp]
    return _drop_constant_keys(tp[keys + list(THROUGHPUT_COLUMNS)]).rename(columns=THROUGHPUT_COLUMNS)


STATUS_STYLE = {"pass": "green", "regression": "bold red", "inconclusive": "yellow", "warning": "magenta"}


def checks_table(checks: list[Check], title: str) -> Table:
    """Every gate check: status (coloured), what was checked, where, and why."""
    table = narrow_table(title)
    for col in ("status", "check", "cell", "reason"):
        add_column(table, col, [])
    for c in checks:
        table.add_row(f"[{STATUS_STYLE[c.status]}]{c.status}[/]", c.name, c.where, c.reason)
    return table


def verdict_basis(result: GateResult) -> str:
    """One line on what the verdict rests on: the checks that decided it, by kind, and one of their reasons."""
    deciding = [c for c in result.checks if c.status == result.verdict]
    if not deciding:
        return "no checks"
    total = Counter(c.kind for c in result.checks)
    counts = Counter(c.kind for c in deciding)
    kinds = ", ".join(f"{n} of {total[kind]} {kind.replace('_', ' ')}" for kind, n in counts.items())
    first = deciding[0]
    return f"{result.verdict} from {kinds} checks; e.g. {first.name} [{first.where}]: {first.reason}"


def _acc(a: float, lo: float, hi: float) -> str:
    return "-" if math.isnan(a) else f"{a:.3f} [{lo:.2f},{hi:.2f}]"


def paired_view(table: pd.DataFrame) -> pd.DataFrame:
    """Paired comparisons, one row per candidate cell: both accuracies, the drop, flips, p-values."""
    keys = [c for c in ("comparison", *CELL_KEYS) if c in table]
    view = _drop_constant_keys(table[keys].copy())
    view["n"] = table["n"]
    view["reference"] = [_acc(a, lo, hi) for a, lo, hi in zip(table["ref_acc"], table["ref_lo"], table["ref_hi"])]
    view["candidate"] = [_acc(a, lo, hi) for a, lo, hi in zip(table["cand_acc"], table["cand_lo"], table["cand_hi"])]
    view["drop"] = table["acc_drop"]
    view["right->wrong"] = table["b"]
    view["wrong->right"] = table["c"]
    view["p (2-sided)"] = table["p_two_sided"]
    if "p_two_sided_holm" in table:
        view["p Holm"] = table["p_two_sided_holm"]
    return view


def decisions_view(decisions: list[CellDecision]) -> pd.DataFrame:
    """Per cell of a sequential run: its verdict against the baseline, the look, the questions
    answered and the requests not sent."""
    return pd.DataFrame(
        [
            {
                **decision.model_dump(exclude={"by_e_process", "planned"}),
                "of": decision.planned,
                "saved": decision.saved,
                "shown by": "e-process" if decision.by_e_process else "z bound" if decision.reason != "inconclusive" else "",
            }
            for decision in decisions
        ]
    )


def decisions_table(decisions: list[CellDecision]) -> Table:
    saved, planned = sum(d.saved for d in decisions), sum(d.planned for d in decisions)
    title = f"Sequential decisions vs the baseline: {saved} of {planned} requests saved"
    return frame_table(_drop_constant_keys(decisions_view(decisions)), title)


def settings_view(diff: pd.DataFrame) -> pd.DataFrame:
    """Resolved settings that differ: the server, the setting, the reference's and the candidate's value."""
    view = diff.rename(columns={"reference_value": "before", "value": "after"})
    return _drop_constant_keys(view[["profile", "variant", "cache", "reference", "setting", "before", "after"]])


def cliffs_table(found: pd.DataFrame, tolerance: float) -> Table:
    """The cliffs `analysis.gate.cliffs` found: a description of where accuracy departs, not a check."""
    view = found[["profile", "variant", "pass_index", "column", "bin", "min_tokens", "n", "b", "c", "acc_drop", "p_adjusted"]]
    return frame_table(view, f"Cliffs: cache-on accuracy below cache-off by > {tolerance} from this length on (described, not judged)")


def ratio_view(ratios: pd.DataFrame) -> pd.DataFrame:
    """Candidate/reference throughput ratios, one column per measure."""
    keys = [c for c in ("comparison", *CELL_KEYS) if c in ratios]
    if ratios.empty:
        return pd.DataFrame(columns=keys)
    wide = ratios.pivot_table(index=keys, columns="measure", values="ratio", sort=True).reset_index()
    wide.columns.name = None
    names = {m: f"{label} ratio" for m, label in THROUGHPUT_COLUMNS.items()}
    return _drop_constant_keys(wide.rename(columns=names))


def _short(text: object, width: int) -> str:
    text = "-" if text is None or (isinstance(text, float) and math.isnan(text)) else " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def flips_view(flipped: pd.DataFrame, width: int = 60) -> pd.DataFrame:
    """Flipped questions: the cell, direction, question, target and both answers, shortened to `width`."""
    keys = [c for c in CELL_KEYS if c in flipped]
    view = _drop_constant_keys(flipped[[*keys, "doc_id", "direction"]].copy())
    view["question"] = [_short(q, width) for q in flipped["question"]]
    view["target"] = flipped["target"]
    for side in ("reference", "candidate"):
        answers, responses = flipped[f"{side}_answer"], flipped[f"{side}_response"]
        view[f"{side} answer"] = [f"{a} | {_short(r, width // 2)}" for a, r in zip(answers, responses)]
    return view
