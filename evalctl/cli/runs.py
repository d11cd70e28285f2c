"""`evalctl runs list`: the run folders of a results root, broken ones included."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated

import typer

from evalctl.cli.common import console, fail

app = typer.Typer(help="List the runs in a results folder.", no_args_is_help=True)


def parse_date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise fail(f"--since must be a date like 2026-11-01, got {text!r}") from None


@app.command("list")
def list_runs(
    model: Annotated[str | None, typer.Option("--model", "-m", help="Only runs of this model label.")] = None,
    since: Annotated[str | None, typer.Option(help="Only runs created on or after this date (YYYY-MM-DD, UTC).")] = None,
    root: Annotated[Path, typer.Option("--root", help="Results folder holding the run folders.")] = Path("results"),
) -> None:
    """List runs newest first with status and sample counts; partial or corrupt run folders are listed as such."""
    from evalctl.history.store import HistoryStore
    from evalctl.report.terminal import runs_table

    runs = HistoryStore(root).runs(model=model, since=None if since is None else parse_date(since))
    if runs.empty:
        console.print(f"no runs in {root}" + (f" for model {model}" if model else ""))
        return
    console.print(runs_table(runs, f"Runs in {root}"))
