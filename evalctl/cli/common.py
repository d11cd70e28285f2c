"""What every command shares: the consoles, exit codes, and how errors are printed."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.markup import escape

console = Console()
err = Console(stderr=True)

EXIT_USAGE = 2
EXIT_FAILED_CELLS = 3


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    """Print a specific error and return the Exit to raise."""
    # Escaped: messages hold paths and commands (pip install '.[cpu]') whose brackets are not markup.
    err.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)  # paths stay whole, greppable
    return typer.Exit(code)
