"""The `evalctl` command line: parse, call, print. No computation lives here.

One module per command (group); this one assembles the Typer app.
"""

from __future__ import annotations

import inspect
from typing import Annotated

import typer

from evalctl import __version__
from evalctl.cli import analyze, bisect, canary, compare, dashboard, gate, history, models, probe, report, runs, servers, slurm, sweep
from evalctl.cli.common import EvalctlGroup, console, handle_errors
from evalctl.errors import ExitCode

app = typer.Typer(
    help="Catch accuracy regressions in served language models: sweep few-shot count x prefix cache "
    "x server configuration, then analyse with paired statistics.",
    epilog="Exit status of every command:\n\n" + "\n".join(ExitCode.table()),
    cls=EvalctlGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        console.print(f"evalctl {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[bool | None, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")] = None,
) -> None:
    """evalctl: accuracy-regression sweeps for served LLMs."""


app.command()(sweep.sweep)
app.command()(analyze.analyze)
app.command()(compare.compare)
app.command()(gate.gate)
app.command()(slurm.jobs)
app.add_typer(servers.app, name="servers")
app.add_typer(runs.app, name="runs")
app.add_typer(models.app, name="models")
app.command()(history.history)
app.command()(dashboard.dashboard)
app.command()(report.report)
app.command()(probe.probe)
app.command()(canary.canary)
app.command()(bisect.bisect)


def _unwrap_help(typer_app: typer.Typer) -> None:
    """Docstrings as help text: each paragraph's lines joined, so the terminal wraps them, not the source."""
    for info in typer_app.registered_commands:
        if info.help is None and info.callback is not None and info.callback.__doc__:
            paragraphs = inspect.cleandoc(info.callback.__doc__).split("\n\n")
            info.help = "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)
    for group in typer_app.registered_groups:
        _unwrap_help(group.typer_instance)


_unwrap_help(app)
handle_errors(app)
