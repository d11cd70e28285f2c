"""What every command shares: the consoles, exit codes, and how errors are printed."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from evalctl.errors import EXIT_ERROR, EXIT_USAGE, EvalctlError

console = Console()
err = Console(stderr=True)

EXIT_FAILED_CELLS = 3


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    """Print a specific error and return the Exit to raise."""
    # Escaped: messages hold paths and commands (pip install '.[cpu]') whose brackets are not markup.
    err.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)  # paths stay whole, greppable
    return typer.Exit(code)


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
