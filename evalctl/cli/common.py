"""What every command shares: the consoles, exit codes, and how errors are printed."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape

from evalctl.errors import EXIT_ERROR, EXIT_USAGE, EvalctlError

if TYPE_CHECKING:
    from evalctl.runs import Run

console = Console()
err = Console(stderr=True)

EXIT_FAILED_CELLS = 3


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    """Print a specific error and return the Exit to raise."""
    # Escaped: messages hold paths and commands (pip install '.[cpu]') whose brackets are not markup.
    err.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)  # paths stay whole, greppable
    return typer.Exit(code)


def say_if_running(run: Run, writes: str | None = None) -> bool:
    """Tell the user the run is being written (by whom) and that what follows is its rows so far; whether it is.

    `writes`: the run-folder files this command leaves to the writer (it writes them when it ends)."""
    if not run.live:
        return False
    who = "; ".join(h.describe() for h in run.writers)
    left = f" {writes} not written into the run folder (the writer does that when it ends; --output writes them elsewhere)." if writes else ""
    err.print(
        f"[yellow]running:[/yellow] {escape(str(run.path))} is being written by {escape(who)}; "
        f"read as of now ({len(run.samples)} rows).{escape(left)}",
        highlight=False,
        soft_wrap=True,
    )
    return True


def exits_on_error(command: Callable[..., Any]) -> Callable[..., Any]:
    """The one place errors become exit statuses: an EvalctlError its own, an OSError (disk, permissions) 1."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except EvalctlError as exc:
            raise fail(str(exc), exc.exit_code) from None
        except OSError as exc:
            raise fail(str(exc), EXIT_ERROR) from None

    return run


def handle_errors(app: typer.Typer) -> typer.Typer:
    """Wrap every command of `app` and its sub-apps in `exits_on_error`."""
    for info in app.registered_commands:
        info.callback = exits_on_error(info.callback)
    for group in app.registered_groups:
        handle_errors(group.typer_instance)
    return app
