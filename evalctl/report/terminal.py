"""Rich tables for the terminal, rendered from analysis DataFrames."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pandas as pd
from rich import box
from rich.console import Group
from rich.markup import escape
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from evalctl.analysis.accuracy import accuracy_columns, table_metrics
from evalctl.records import CELL_KEYS

if TYPE_CHECKING:
    from evalctl.analysis.evidence import DecidingCheck, Evidence, PartedRequest
    from evalctl.analysis.gate import Check, GatePolicy, GateResult
    from evalctl.manifest import CellDecision, JobEntry


def _fmt(value: object, column: str) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        if column.startswith(("p ", "p_")):
            return f"{value:.2g}"
        if column.endswith(("_acc", "_lo", "_hi", "ratio", "drop", " JS")):
            return f"{value:.3f}"
        return f"{value:.2f}"
    return str(value)


# Columns that say which cell a row is: repeated in every part of a table split to fit.
KEY_COLUMNS = ("comparison", *CELL_KEYS, "bin", "column", "doc_id", "run_id")
COLUMN_GAP = 2  # FittedTable.table: one space of padding on each side of a rule-less column boundary

Column = tuple[str, list[str], bool]  # header, cells (Rich markup), numeric


def plain(cell: str) -> str:
    """A cell as the terminal shows it (cells are Rich markup)."""
    return Text.from_markup(cell).plain


def narrowest(header: str, cells: list[str], numeric: bool) -> int:
    """The narrowest a column can be without cutting: its longest word (a whole number when numeric)."""
    texts = [plain(c) for c in cells]
    words = [*header.split(), *(word for t in texts for word in ([t] if numeric else t.split()))]
    return max(map(len, words), default=1)


def widest(header: str, cells: list[str]) -> int:
    """The width at which no header or cell of the column wraps."""
    return max(len(plain(t)) for t in (header, *cells))


def allot(columns: list[Column], width: int, first: int | None = None) -> list[int]:
    """Column widths within `width`: each at least its narrowest; the space left goes first to column `first` (the one
    a reader reads, when given), then to the columns that need least of it to stop wrapping. (Rich's own shrinking
    narrows the widest column first, below its longest word, and so cuts values.)"""
    low = [narrowest(*c) for c in columns]
    need = [widest(header, cells) - lo for (header, cells, _), lo in zip(columns, low)]
    spare = width - sum(low) - COLUMN_GAP * (len(columns) - 1)
    for i in sorted(range(len(columns)), key=lambda i: (i != first, need[i])):
        grow = max(0, min(spare, need[i]))
        low[i], spare = low[i] + grow, spare - grow
    return low


class FittedTable:
    """A table that never cuts a header or a value. Its columns get at least their longest word;
    when they cannot all have that within the terminal, the table is split into parts, one below
    the other, each repeating the key columns that name the row (profile, cache, shots...)."""

    def __init__(self, title: str, columns: list[Column], keys: int, read: str | None = None):
        self.title, self.columns, self.keys, self.read = title, columns, keys, read  # read: the column widened first

    def table(self, columns: list[Column], width: int) -> Table:
        # reads at 80 columns: no outer edge or vertical rules, one space between columns
        table = Table(header_style="bold", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
        first = next((i for i, (header, _, _) in enumerate(columns) if header == self.read), None)
        for (header, cells, numeric), size in zip(columns, allot(columns, width, first)):
            low = narrowest(header, cells, numeric)  # headers and text wrap at spaces; no header or number is cut
            table.add_column(header, justify="right" if numeric else "left", min_width=low, width=size, overflow="fold")
        for row in zip(*(cells for _, cells, _ in columns)):
            table.add_row(*row)
        return table

    def parts(self, width: int) -> list[list[Column]]:
        keys, values = self.columns[: self.keys], self.columns[self.keys :]

        def fits(cols: list[Column]) -> bool:
            return sum(narrowest(*c) for c in cols) + COLUMN_GAP * (len(cols) - 1) <= width

        if not values or fits(self.columns):
            return [self.columns]
        if not fits(keys + [min(values, key=lambda c: narrowest(*c))]):
            return []  # not even the keys and one value fit: stacked, see __rich_console__
        parts: list[list[Column]] = [[]]
        for column in values:
            if parts[-1] and not fits(keys + parts[-1] + [column]):
                parts.append([])
            parts[-1].append(column)
        return [keys + part for part in parts]

    def stacked(self, width: int) -> Iterator[Table | Text]:
        """One small two-column table per row (header, value): for terminals too narrow for the keys."""
        yield Text(self.title, style="table.title")
        yield Text()
        headers = [header for header, _, _ in self.columns]
        for row in zip(*(cells for _, cells, _ in self.columns)):
            yield self.table([("field", headers, False), ("value", list(row), False)], width)

    def __rich_console__(self, console, options):
        parts = self.parts(options.max_width)
        if not parts:
            yield from self.stacked(options.max_width)
        for i, columns in enumerate(parts):
            # the title on its own line, wrapped by the terminal (Rich folds a title into a narrow table's width)
            yield Text(self.title if len(parts) == 1 else f"{self.title} ({i + 1}/{len(parts)})", style="table.title")
            yield self.table(columns, options.max_width)

    def __rich_measure__(self, console, options) -> Measurement:
        return Measurement(1, options.max_width)


def formatted(df: pd.DataFrame) -> list[list[str]]:
    """A frame's rows as display strings (the terminal's and the HTML pages' tables alike)."""
    return [[_fmt(v, str(c)) for v, c in zip(row, df.columns)] for row in df.itertuples(index=False)]


def frame_table(df: pd.DataFrame, title: str) -> FittedTable:
    rows = formatted(df)
    cells = [(col, [r[i] for r in rows], pd.api.types.is_numeric_dtype(df[col])) for i, col in enumerate(df.columns)]
    keys = next((i for i, col in enumerate(df.columns) if col not in KEY_COLUMNS), len(df.columns))
    return FittedTable(title, cells, keys)


def _drop_constant_keys(df: pd.DataFrame) -> pd.DataFrame:
    """Hide key columns that say nothing in this run (one variant, one pass, one concurrency level, one comparison)."""
    drop = [c for c, trivial in (("variant", "default"), ("pass_index", 1)) if c in df and set(df[c]) <= {trivial}]
    drop += [c for c in ("concurrency", "comparison") if c in df and df[c].nunique() <= 1]
    return df.drop(columns=drop)


def _acc(a: float, lo: float, hi: float, places: int = 2) -> str:
    """An accuracy with its interval in one readable cell."""
    return "-" if math.isnan(a) else f"{a:.{places}f} [{lo:.2f},{hi:.2f}]"


def accuracy_view(acc: pd.DataFrame) -> pd.DataFrame:
    view = _drop_constant_keys(acc)
    metrics = table_metrics(acc)
    for metric in metrics:
        view[metric] = [_acc(*bounds) for bounds in zip(view[f"{metric}_acc"], view[f"{metric}_lo"], view[f"{metric}_hi"])]
    return view.drop(columns=accuracy_columns(metrics))


MS_PREFIXES = ("ttft", "itl")  # shown in ms: an inter-token gap is a few ms, "0.01" s said little
PERCENTILES = ("p50", "p90", "p99")
THROUGHPUT_COLUMNS = {
    "requests_per_s": "req/s",
    "goodput_per_s": "goodput/s",
    "output_tokens_per_s": "out tok/s",
    "user_tokens_per_s": "tok/s/user",
    **{f"latency_{p}_s": f"{p} s" for p in PERCENTILES},
    **{f"{m}_{p}_s": f"{m} {p} ms" for m in MS_PREFIXES for p in PERCENTILES},
    "mean_prompt_tokens": "prompt tok",
    "cache_hit_ratio": "hit ratio",
    "in_flight_mean": "in flight",
    "in_flight_max": "max in flight",
}


def throughput_view(tp: pd.DataFrame, keys: list[str] | None = None) -> pd.DataFrame:
    """The throughput table for people (rows named by `keys`, default the cell's); goodput and the ITL columns only
    where measured (an objective, streaming)."""
    keys = keys or [c for c in CELL_KEYS if c in tp]
    shown = [c for c in THROUGHPUT_COLUMNS if c in tp and not (c.startswith(("goodput", "itl")) and tp[c].isna().all())]
    view = tp[keys + shown].assign(**{c: tp[c] * 1000 for c in shown if c.startswith(MS_PREFIXES)})
    return _drop_constant_keys(view).rename(columns=THROUGHPUT_COLUMNS)


STATUS_STYLE = {"pass": "green", "regression": "bold red", "inconclusive": "yellow", "warning": "magenta"}


def checks_table(checks: list[Check], title: str) -> FittedTable:
    """Every gate check: status (coloured), what was checked, where, and why."""
    cells = [[f"[{STATUS_STYLE[c.status]}]{c.status}[/]" for c in checks], [c.name for c in checks], [c.where for c in checks],
             [escape(c.reason) for c in checks]]  # fmt: skip
    columns = [(h, col, False) for h, col in zip(("status", "check", "cell", "reason"), cells)]
    return FittedTable(title, columns, keys=0, read="reason")


def tolerance_note(policy: GatePolicy) -> str:
    """The policy's tolerance in words, for the verdict line."""
    floor = f", warm disagreement over the A/A floor {policy.floor_margin:.2f}" if policy.agreement_floor is not None else ""
    return f"tolerated {policy.metric} accuracy drop {policy.max_accuracy_drop:.2f}{floor}, alpha {policy.alpha}, min {policy.min_n} pairs"


def verdict_basis(result: GateResult) -> str:
    """One line on what the verdict rests on: the checks that decided it, by kind, and one of their reasons."""
    deciding = [c for c in result.checks if c.status == result.verdict]
    if not deciding:
        return "no checks"
    total = Counter(c.kind for c in result.checks)
    counts = Counter(c.kind for c in deciding)
    kinds = ", ".join(f"{n} of {total[kind]} {kind.replace('_', ' ')}" for kind, n in counts.items())
    first = deciding[0]
    where = f" [{first.where}]" if first.where else ""
    return f"{result.verdict} from {kinds} checks; e.g. {first.name}{where}: {first.reason}"


# Deciding checks the verdict's evidence lists on the terminal and in gate-summary.md; gate.json holds every one.
SHOWN_EVIDENCE = 3


def decided_by(evidence: Evidence | None) -> str:
    """The verdict line's tail: how many checks decided it (none for a pass), its evidence listed below."""
    count = len(evidence.checks) if evidence else 0
    return f", decided by {count} check{'' if count == 1 else 's'}:" if count else ""


def check_text(check: DecidingCheck) -> str:
    """A deciding check, its cell and the counts it has (b right->wrong, c wrong->right, n pairs or answers):
    'cache on vs off [cpu/default cache=on shots=8 conc=4 pass=1]: b 20, c 0, n 60'."""
    counts = ", ".join(f"{name} {value}" for name, value in (("b", check.b), ("c", check.c), ("n", check.n)) if value is not None)
    where = f" [{check.where}]" if check.where else ""
    return f"{check.name}{where}" + (f": {counts}" if counts else "")


def parted_text(request: PartedRequest, unit: str) -> str:
    """One of the worst requests: 'doc 5 (extend): parts at character 0; 1205 prompt, 1145 cached tokens'."""
    turn = f" ({request.turn_kind})" if request.turn_kind else ""
    tokens = f"{_count(request.prompt_tokens)} prompt, {_count(request.cached_tokens)} cached tokens"
    return f"doc {request.doc_id}{turn}: parts at {unit.removesuffix('s')} {request.first_difference}; {tokens}"


def evidence_lines(evidence: Evidence) -> list[tuple[int, str]]:
    """(depth, text): each deciding check (the first `SHOWN_EVIDENCE`) with its counts, its worst requests below it."""
    lines = []
    for check in evidence.checks[:SHOWN_EVIDENCE]:
        lines.append((0, check_text(check)))
        lines += [(1, parted_text(request, evidence.position_unit)) for request in check.worst]
    if len(evidence.checks) > SHOWN_EVIDENCE:
        lines.append((0, f"and {len(evidence.checks) - SHOWN_EVIDENCE} more (gate.json: evidence)"))
    return lines


def evidence_view(evidence: Evidence) -> Group:
    """Under the verdict line: the evidence, each line wrapped within its own indent at the terminal's width (plain
    Text: cells hold brackets, never markup)."""
    return Group(*(Padding(Text(text), (0, 0, 0, 2 + 2 * depth), expand=False) for depth, text in evidence_lines(evidence)))


def paired_view(table: pd.DataFrame) -> pd.DataFrame:
    """Paired comparisons, one row per candidate cell: both accuracies, the drop, flips, p-values."""
    keys = [c for c in ("comparison", *CELL_KEYS) if c in table]
    view = _drop_constant_keys(table[keys].copy())
    view["n"] = table["n"]
    for name, side in (("reference", "ref"), ("candidate", "cand")):
        view[name] = [_acc(*bounds, places=3) for bounds in zip(table[f"{side}_acc"], table[f"{side}_lo"], table[f"{side}_hi"])]
    shown = {"acc_drop": "drop", "b": "right->wrong", "c": "wrong->right", "p_two_sided": "p (2-sided)", "p_two_sided_holm": "p Holm"}
    for column, name in shown.items():
        if column in table:  # Holm's p only where the comparisons were adjusted
            view[name] = table[column]
    return view


def gate_paired_view(checks: list[Check], alpha: float) -> pd.DataFrame:
    """The gate's paired accuracy checks, one row per candidate cell, with the figures that decided each
    (as in gate.json): pairs, flips, the drop, the interval that inverts the rule's two tests, Holm's p."""
    rows = [
        {
            "comparison": c.comparison,
            **{k: getattr(c, k) for k in CELL_KEYS},
            "n": c.n,
            "right->wrong": c.b,
            "wrong->right": c.c,
            "drop": c.value,
            f"{1 - 2 * alpha:.0%} interval": "-" if c.lower is None or c.upper is None else f"[{c.lower:.3f},{c.upper:.3f}]",
            "p beyond tol, Holm": math.nan if c.p_adjusted is None else c.p_adjusted,
            "verdict": f"[{STATUS_STYLE[c.status]}]{c.status}[/]",
        }
        for c in checks
        if c.kind == "accuracy" and c.n is not None
    ]
    return _drop_constant_keys(pd.DataFrame(rows)) if rows else pd.DataFrame()


def decisions_view(decisions: list[CellDecision]) -> pd.DataFrame:
    """Per cell of a sequential run: its verdict against the baseline, the look, questions answered, requests not sent."""
    return pd.DataFrame(
        [
            {
                **decision.model_dump(exclude={"by_e_process", "planned"}),
                "of": decision.planned,
                "saved": decision.saved,
                "shown by": "e-process" if decision.by_e_process else "z bound" if decision.verdict != "inconclusive" else "",
            }
            for decision in decisions
        ]
    )


def decisions_table(decisions: list[CellDecision]) -> FittedTable:
    saved, planned = sum(d.saved for d in decisions), sum(d.planned for d in decisions)
    title = f"Sequential decisions vs the baseline: {saved} of {planned} requests saved"
    return frame_table(_drop_constant_keys(decisions_view(decisions)), title)


def settings_view(diff: pd.DataFrame) -> pd.DataFrame:
    """Resolved settings that differ: the server, the setting, the reference's and the candidate's value."""
    view = diff.rename(columns={"reference_value": "before", "value": "after"})
    return _drop_constant_keys(view[["profile", "variant", "cache", "reference", "setting", "before", "after"]])


def cliffs_table(found: pd.DataFrame, tolerance: float) -> FittedTable:
    """The cliffs `analysis.gate.cliffs` found: a description of where accuracy departs, not a check."""
    view = _drop_constant_keys(
        found[["profile", "variant", "pass_index", "column", "bin", "min_tokens", "n", "b", "c", "acc_drop", "p_adjusted"]]
    )
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
    text = "-" if pd.isna(text) else " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def flips_view(flipped: pd.DataFrame, width: int = 60) -> pd.DataFrame:
    """Flipped questions: the cell, direction, question, target and both answers, shortened to `width`."""
    keys = [c for c in CELL_KEYS if c in flipped]
    view = _drop_constant_keys(flipped[[*keys, "doc_id", "direction"]].copy())
    view["question"] = [_short(q, width) for q in flipped["question"]]
    view["target"] = flipped["target"]
    for side in ("reference", "candidate"):
        answers, responses = flipped[f"{side}_answer"], flipped[f"{side}_response"]
        # "(none)" where the metric extracted no answer, never pandas' "nan"
        view[f"{side} answer"] = [f"{'(none)' if pd.isna(a) else a} | {_short(r, width // 2)}" for a, r in zip(answers, responses)]
    return view


FLIPS_SHOWN = 10


def regressed_flips_table(flipped: pd.DataFrame) -> FittedTable:
    """The first flipped questions of the regressed cells: what cache off answered and what cache on did."""
    title = f"Flipped questions of the regressed cells, cache off -> on ({min(FLIPS_SHOWN, len(flipped))} of {len(flipped)})"
    return frame_table(flips_view(flipped.head(FLIPS_SHOWN), width=40), title)


# A probe's bin columns as shown; divergences (" JS") to 3 places.
PROBE_COLUMNS = {"bin": "bin", "prefix_tokens": "prefix", "cached_tokens": "cached", "mismatch": "warm≠", "baseline_mismatch": "cold≠",
                 "first_divergence": "div@", "js": "warm JS", "baseline_js": "cold JS", "verdict": "verdict"}  # fmt: skip
PROBE_STYLE = {"pass": "green", "fail": "red", "inconclusive": "yellow"}


def probe_bins_table(bins: pd.DataFrame, title: str) -> FittedTable:
    """A probe's bins: prefix, cached tokens, cold/warm mismatches and divergences, the verdict (coloured)."""
    view = bins.reindex(columns=list(PROBE_COLUMNS)).rename(columns=PROBE_COLUMNS)
    return frame_table(view.assign(verdict=[f"[{PROBE_STYLE.get(v, '')}]{v}[/]" for v in view["verdict"]]), title)


JOB_COLUMNS = {"part": "part", "job_id": "job id", "slurm_state": "slurm state", "node": "node", "run_state": "run state",
               "reason": "reason", "submitted_at": "submitted"}  # fmt: skip


def jobs_table(rows: list[JobEntry], title: str) -> FittedTable:
    """A run's Slurm jobs: Slurm's state and the part's own, "-" where not known."""
    view = pd.DataFrame([row.model_dump() for row in rows], columns=list(JOB_COLUMNS)).rename(columns=JOB_COLUMNS)
    return frame_table(view.astype(object).where(view.notna(), "-"), title)


def _count(value: object) -> str:
    return "-" if pd.isna(value) else str(int(value))


def runs_table(runs: pd.DataFrame, title: str) -> FittedTable:
    """`HistoryStore.runs`: one row per run folder, "-" where a broken one has no figure."""
    view = runs.drop(columns="path").assign(samples=runs["samples"].map(_count), cells=runs["cells"].map(_count))
    return frame_table(view.assign(created_at=runs["created_at"].dt.strftime("%Y-%m-%d %H:%M:%S").fillna("-")), title)


def history_table(trend: pd.DataFrame, label: str, title: str) -> FittedTable:
    """`HistoryStore.history`: a metric per run under `label`; an interval only for an accuracy."""
    view = trend.assign(created_at=trend["created_at"].dt.strftime("%Y-%m-%d %H:%M")).rename(columns={"value": label})
    return frame_table(view if "accuracy" in label else view.drop(columns=["lo", "hi"]), title)
