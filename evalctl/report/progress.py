"""Rich progress bars for server start-up and requests."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from evalctl.execution.progress import SweepProgress


class RichProgress(SweepProgress):
    """A sweep's events as Rich progress bars: server start-up, then one bar per cell."""

    def __init__(self, console: Console):
        self.console = console
        self.bars = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=console, transient=False,
        )  # fmt: skip
        self._server_task = None
        self._cell_task = None
        self._errors = 0

    def __enter__(self) -> RichProgress:
        self.bars.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bars.stop()

    def server_starting(self, label: str, elapsed_s: float) -> None:
        if self._server_task is None:
            self._server_task = self.bars.add_task(f"starting server {label}", total=None)
        self.bars.update(self._server_task, description=f"starting server {label} ({elapsed_s:.0f}s)")

    def server_ready(self, label: str) -> None:
        if self._server_task is not None:
            self.bars.update(self._server_task, description=f"server {label} ready", total=1, completed=1)
            self._server_task = None
        else:
            self.console.print(f"server {label} ready")

    def cell_started(self, label: str, total: int) -> None:
        self._errors = 0
        self._cell_task = self.bars.add_task(label, total=total)

    def request_done(self, ok: bool) -> None:
        if not ok:
            self._errors += 1
        if self._cell_task is not None:
            self.bars.advance(self._cell_task)

    def cell_done(self, label: str) -> None:
        if self._errors and self._cell_task is not None:
            self.bars.update(self._cell_task, description=f"{label} [red]{self._errors} errors[/red]")
        self._cell_task = None

    def warn(self, message: str) -> None:
        self.console.print(f"[yellow]warning:[/yellow] {message}")
