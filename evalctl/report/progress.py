"""Rich progress bars for server start-up and requests."""

from __future__ import annotations

import threading

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from evalctl.execution.progress import SweepProgress


class _ThreadBars(threading.local):
    """One thread's server bar, cell bar and error count (each thread starts from these)."""

    server = None
    cell = None
    errors = 0


class RichProgress(SweepProgress):
    """A sweep's events as Rich progress bars: server start-up, then one bar per cell; launches side by side each
    report from their own thread, so each thread has its own bars."""

    def __init__(self, console: Console):
        self.console = console
        self.bars = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=console, transient=False,
        )  # fmt: skip
        self._bar = _ThreadBars()

    def __enter__(self) -> RichProgress:
        self.bars.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bars.stop()

    def server_starting(self, label: str, elapsed_s: float) -> None:
        if self._bar.server is None:
            self._bar.server = self.bars.add_task(f"starting server {label}", total=None)
        self.bars.update(self._bar.server, description=f"starting server {label} ({elapsed_s:.0f}s)")

    def server_ready(self, label: str) -> None:
        if self._bar.server is not None:
            self.bars.update(self._bar.server, description=f"server {label} ready", total=1, completed=1)
            self._bar.server = None
        else:
            self.console.print(f"server {label} ready")

    def cell_started(self, label: str, total: int) -> None:
        self._bar.errors, self._bar.cell = 0, self.bars.add_task(label, total=total)

    def request_done(self, ok: bool) -> None:
        self._bar.errors += not ok
        if self._bar.cell is not None:
            self.bars.advance(self._bar.cell)

    def cell_done(self, label: str) -> None:
        if self._bar.errors and self._bar.cell is not None:
            self.bars.update(self._bar.cell, description=f"{label} [red]{self._bar.errors} errors[/red]")
        self._bar.cell = None

    def warn(self, message: str) -> None:
        self.console.print(f"[yellow]warning:[/yellow] {message}")
