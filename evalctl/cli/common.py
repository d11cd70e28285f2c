"""What every command shares: the consoles, and how errors become the exit statuses of `errors.ExitCode`."""

from __future__ import annotations

import functools
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from evalctl.errors import EvalctlError, ExitCode
from evalctl.signals import Interrupted

# Click's usage-error classes, as whichever click Typer uses (its own copy since Typer 0.2x) raises them.
UsageError = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
ClickException = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")

if TYPE_CHECKING:
    from evalctl.runs import Run

console = Console()
err = Console(stderr=True)


def fail(message: str, code: ExitCode = ExitCode.BAD_INPUT) -> typer.Exit:
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
    left = (
        f" {writes} not written into the run folder (the writer does that when it ends; --output writes them elsewhere)." if writes else ""
    )
    err.print(
        f"[yellow]running:[/yellow] {escape(str(run.path))} is being written by {escape(who)}; "
        f"read as of now ({len(run.samples)} rows).{escape(left)}",
        highlight=False,
        soft_wrap=True,
    )
    return True


def exits_on_error(command: Callable[..., Any]) -> Callable[..., Any]:
    """The one place errors become exit statuses: an EvalctlError its own, an OSError (disk, permissions)
    or any other exception INTERNAL, so no failure ever exits 1 (a regression) as Python's default would."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort, ClickException):
            raise  # typer.Exit is a RuntimeError: the statuses commands chose go through
        except EvalctlError as exc:
            raise fail(str(exc), exc.exit_status) from None
        except OSError as exc:
            raise fail(str(exc), ExitCode.INTERNAL) from None
        except Interrupted as exc:
            raise typer.Exit(exc.exit_status) from None
        except Exception as exc:
            traceback.print_exc()
            raise fail(f"internal error (a bug in evalctl, please report it): {exc!r}", ExitCode.INTERNAL) from None

    return run


@contextmanager
def _usage_is_bad_input() -> Iterator[None]:
    try:
        yield
    except UsageError as exc:
        exc.exit_code = ExitCode.BAD_INPUT
        raise
    except typer.Abort:  # click's own KeyboardInterrupt (in a prompt)
        raise typer.Exit(ExitCode.INTERRUPTED) from None


class EvalctlGroup(TyperGroup):
    """The root command: click's usage errors (unknown option, bad value, missing argument) exit
    BAD_INPUT instead of click's 2, which is INCONCLUSIVE in evalctl's table."""

    def make_context(self, *args: Any, **kwargs: Any) -> typer.Context:
        with _usage_is_bad_input():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: typer.Context) -> Any:
        with _usage_is_bad_input():  # sub-commands parse their options inside the root's invoke
            return super().invoke(ctx)
