"""`evalctl servers show`: the exact server commands a sweep would run; launches nothing."""

from __future__ import annotations

import re
import shlex

import typer
from rich.markup import escape

from evalctl.cli.common import console, err
from evalctl.cli.options import ConfigFile, Model, Overrides, config_options, resolve_config
from evalctl.plan import expand
from evalctl.servers.gpus import gpu_assignment, placeholder_gpus, visible_gpus
from evalctl.servers.registry import adapter_for

app = typer.Typer(help="Inspect the inference servers a sweep launches.", no_args_is_help=True)

# The sweep picks a free port (unless the profile fixes one) and a folder in the run directory.
PORT_PLACEHOLDER = "$PORT"
WORKDIR_PLACEHOLDER = "$RUN_DIR/server-slots"


@app.command()
@config_options("variants", "cache", "gpus")
def show(model: Model = None, config: ConfigFile = None, overrides: Overrides | None = None) -> None:
    """Print, per server profile x variant x cache mode, the exact command, environment and GPUs.

    `$PORT` stands for the port the sweep picks when the profile fixes none.
    """
    resolved = resolve_config(model, config, None, overrides)
    if resolved.gpus is None and any(p.gpus_needed() for p in resolved.servers) and not visible_gpus()[0]:
        # A preview is planned where there are no GPUs (laptop, login node): show where the ids go.
        resolved = resolved.model_copy(update={"gpus": placeholder_gpus(resolved.servers)})
        err.print(
            "note: no GPU is visible here; $GPU0, $GPU1, ... stand for the ids the sweep will use (--gpus N checks the sweep fits N GPUs)",
            highlight=False,
        )
    assignment = gpu_assignment(resolved)
    for launch in expand(resolved):
        profile = launch.profile
        engine = profile.engine.name if profile.engine else None
        devices = assignment.get(profile.name, [])
        console.rule(escape(f"{launch.label}  [{engine or 'detected at start'}]"), style="cyan")  # the brackets are text, not markup
        where = f"{profile.gpu or 'GPU'} x{len(devices)}: CUDA_VISIBLE_DEVICES={','.join(devices)}" if devices else "no GPUs assigned"
        console.print(f"gpus:    {where}", highlight=False, markup=False)
        if profile.url:
            console.print(f"url:     {profile.url} (not launched by evalctl)", highlight=False, markup=False)
            if engine is None:
                note = "engine detected at start: one evalctl knows gets cache-off requests cold; any other, cache on/off is a label only"
            elif adapter_for(engine).cold_per_request():
                note = f"cache off: each request is sent cold ({engine}'s per-request switch); cache on: the server's cache"
            else:
                note = f"cache on/off is a label only: evalctl cannot switch or flush {engine}'s cache per request"
            console.print(f"note:    {note}", highlight=False, markup=False)
            continue
        port = str(profile.port) if profile.port else PORT_PLACEHOLDER
        spec = adapter_for(engine).launch_spec(profile, launch.variant, launch.cache, port, WORKDIR_PLACEHOLDER, devices)
        for key, value in spec.env.items():
            console.print(f"env:     {key}={unquote_placeholders(shlex.quote(value))}", highlight=False, markup=False)
        console.print(f"command: {shell_line(spec.argv)}", highlight=False, markup=False, soft_wrap=True)


def unquote_placeholders(text: str) -> str:
    """Placeholders ($PORT, $RUN_DIR/..., $GPU0,$GPU1) stay unquoted so the shell expands them."""
    return re.sub(r"'(\$[A-Z_][^'\s]*)'", r"\1", text)


def shell_line(argv: list[str]) -> str:
    """The command as a shell line."""
    return unquote_placeholders(shlex.join(argv))
