"""The `evalctl` command line: parse, call, print; no computation lives here. One module per command (group)."""

from __future__ import annotations

import inspect
from typing import Annotated

import typer

from evalctl import __version__
from evalctl.cli import analyze, bisect, canary, compare, dashboard, gate, history, models, probe, report, runs, servers, slurm, sweep
from evalctl.cli.common import EvalctlGroup, console, exits_on_error
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


def _prepare(typer_app: typer.Typer) -> None:
    """Each command's docstring as its help, each paragraph's lines joined (the terminal wraps them, not the
    source); each command wrapped in `exits_on_error`, the one place errors become exit statuses."""
    for info in typer_app.registered_commands:
        if info.help is None and info.callback.__doc__:
            paragraphs = inspect.cleandoc(info.callback.__doc__).split("\n\n")
            info.help = "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)
        info.callback = exits_on_error(info.callback)
    for group in typer_app.registered_groups:
        _prepare(group.typer_instance)


_prepare(app)
