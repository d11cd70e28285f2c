"""`evalctl servers show`: the exact server commands a sweep would run; launches nothing."""

from __future__ import annotations

import typer
from rich.markup import escape

from evalctl.cli.common import console, err
from evalctl.cli.options import ConfigFile, Model, Overrides, config_options, resolve_config
from evalctl.plan import expand
from evalctl.servers.preview import preview_launches

app = typer.Typer(help="Inspect the inference servers a sweep launches.", no_args_is_help=True)


@app.command()
@config_options("variants", "cache", "gpus")
def show(model: Model = None, config: ConfigFile = None, overrides: Overrides | None = None) -> None:
    """Print, per server profile x variant x cache mode, the exact command, environment and GPUs.

    `$PORT` stands for the port the sweep picks when the profile fixes none.
    """
    resolved = resolve_config(model, config, None, overrides)
    previews, note = preview_launches(resolved, expand(resolved))
    if note:
        err.print(note, highlight=False)
    for preview in previews:
        console.rule(escape(preview.title), style="cyan")  # the brackets are text, not markup
        for line in preview.lines:
            console.print(line, highlight=False, markup=False)
        if preview.command:
            console.print(preview.command, highlight=False, markup=False, soft_wrap=True)
