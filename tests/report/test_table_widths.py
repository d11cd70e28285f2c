"""Every table of the terminal summary (analyze, gate, compare) at 80 and 60 columns: no header
and no value is cut. A cut shows as a word of a cell that no rendered line holds whole (folded
over two lines, or ended with "…"); the failure prints the lines the user sees."""

from __future__ import annotations

import datetime as dt
import io

import pytest
from analysis.frames import sweep_frame
from conftest import cli
from rich.table import Table
from rich.text import Text
from run_folders import make_run

from evalctl.cli.common import console
from evalctl.report.terminal import FittedTable, plain

DAY = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
POSITIONS = ("start", "middle", "end")


def recall_like(run_id: str, to_wrong: dict[int, set[int]]):
    """Three lengths (records) x cache on/off, 50 questions a cell, with answer positions: the widest tables a sweep prints."""
    df = sweep_frame(n=50, shots=(112, 224, 448), to_wrong=to_wrong, to_right={448: {40}}, run_id=run_id, base_accuracy=0.5)
    return df.assign(answer_position=[POSITIONS[d % 3] for d in df.doc_id])


@pytest.fixture
def runs(tmp_path):
    baseline = make_run(tmp_path, "smollm2-135m", DAY, recall_like("b", {112: {1}}))
    candidate = make_run(tmp_path, "smollm2-135m", DAY, recall_like("c", {112: {1, 2}, 224: set(range(20)), 448: {3}}))
    return candidate, baseline


def cells_of(renderable) -> list[str]:
    """The headers and cells a table holds, as plain text."""
    if isinstance(renderable, FittedTable):
        return [plain(text) for header, cells, _ in renderable.columns for text in (header, *cells)]
    if isinstance(renderable, Table):
        texts = [text for column in renderable.columns for text in (column.header, *column._cells)]
        return [Text.from_markup(t).plain if isinstance(t, str) else Text(t).plain for t in texts]
    return []


def rendered(width: int, monkeypatch, *args: str) -> tuple[str, list]:
    """The command's output at `width` columns and the tables it printed."""
    printed: list = []
    original = console.print

    def recording(*objects, **kw):
        printed.extend(objects)
        original(*objects, **kw)

    buffer = io.StringIO()
    monkeypatch.setattr(console, "print", recording)
    monkeypatch.setattr(console, "_file", buffer)  # not `file`: undoing that would pin pytest's stdout
    monkeypatch.setattr(console, "_width", width)
    out = cli(*args)
    assert out.returncode in (0, 1, 2), out.stdout + out.stderr
    return buffer.getvalue(), [p for p in printed if cells_of(p)]


@pytest.mark.parametrize("width", [80, 60])
@pytest.mark.parametrize("command", ["analyze", "gate", "compare"])
def test_every_summary_table_fits_without_cutting_a_value_or_header(runs, width, command, monkeypatch):
    candidate, baseline = runs
    args = {"analyze": [str(candidate)], "gate": [str(candidate), "--baseline", str(baseline)], "compare": [str(candidate), str(baseline)]}
    text, tables = rendered(width, monkeypatch, command, *args[command])
    lines = text.splitlines()
    assert tables, text
    shown = {word for line in lines for word in line.split()}
    cut = sorted({word for table in tables for cell in cells_of(table) for word in cell.split() if word not in shown})
    too_wide = [line for line in lines if len(line) > width]
    assert not cut and not too_wide and "…" not in text, f"at {width} columns, cut: {cut}\n" + "\n".join(lines)


def test_the_gate_table_gives_its_spare_width_to_the_reason():
    """At 80 columns the reason (what a reader reads) gets the space the other columns do not need to stay unbroken:
    a long check name wraps at its words rather than squeeze the reason into a sliver."""
    from evalctl.analysis.checks.base import Check
    from evalctl.report.terminal import allot, checks_table

    check = Check("warm returns' logprobs against the healthy spread", "divergence", "regression", "word " * 60)
    table = checks_table([check], "t")
    status, name, _, reason = allot(table.columns, 80, first=3)
    assert reason > 30 and name < len(check.name)
    assert allot(table.columns, 80)[3] < reason  # without the preference the name stays whole and the reason narrows
