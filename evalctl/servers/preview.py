"""What `evalctl servers show` prints per launch: the exact command, environment and GPUs; launches nothing."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from evalctl.servers.gpus import gpu_assignment, placeholder_gpus, visible_gpus
from evalctl.servers.registry import adapter_for

if TYPE_CHECKING:
    from evalctl.plan import ServerLaunch
    from evalctl.schema import SweepConfig

# The sweep picks a free port (unless the profile fixes one) and a folder in the run directory.
PORT_PLACEHOLDER = "$PORT"
WORKDIR_PLACEHOLDER = "$RUN_DIR/server-slots"
NO_GPU_NOTE = "note: no GPU is visible here; $GPU0, $GPU1, ... stand for the ids the sweep will use (--gpus N checks the sweep fits N GPUs)"


@dataclass(frozen=True)
class LaunchPreview:
    title: str  # the launch and its engine
    lines: list[str]  # GPUs; a URL's note, or the environment
    command: str | None  # the shell line; None for a server at a URL


def preview_launches(config: SweepConfig, launches: Iterable[ServerLaunch]) -> tuple[Iterator[LaunchPreview], str | None]:
    """Each launch's preview, made as it is read (one that fails comes after those before it), and a
    note when GPU ids are placeholders ($GPU0, ...: no GPU is visible here)."""
    gpus, note = config.gpus, None
    if gpus is None and any(p.gpus_needed() for p in config.servers) and not visible_gpus()[0]:
        # A preview is planned where there are no GPUs (laptop, login node): show where the ids go.
        gpus, note = placeholder_gpus(config.servers), NO_GPU_NOTE
    assignment = gpu_assignment(config.servers, gpus)
    return (_preview(launch, assignment.get(launch.profile.name, [])) for launch in launches), note


def _preview(launch: ServerLaunch, devices: list[str]) -> LaunchPreview:
    profile = launch.profile
    engine = profile.engine.name if profile.engine else None
    title = f"{launch.label}  [{engine or 'detected at start'}]"
    where = f"{profile.gpu or 'GPU'} x{len(devices)}: CUDA_VISIBLE_DEVICES={','.join(devices)}" if devices else "no GPUs assigned"
    lines = [f"gpus:    {where}"]
    if profile.url:
        if engine is None:
            note = "engine detected at start: one evalctl knows gets cache-off requests cold; any other, cache on/off is a label only"
        elif adapter_for(engine).cold_per_request():
            note = f"cache off: each request is sent cold ({engine}'s per-request switch); cache on: the server's cache"
        else:
            note = f"cache on/off is a label only: evalctl cannot switch or flush {engine}'s cache per request"
        return LaunchPreview(title, [*lines, f"url:     {profile.url} (not launched by evalctl)", f"note:    {note}"], None)
    port = profile.port or PORT_PLACEHOLDER  # a fixed port stays a number: SGLang's argv adds 1 to it
    spec = adapter_for(engine).launch_spec(profile, launch.variant, launch.cache, port, WORKDIR_PLACEHOLDER, devices)
    lines += [f"env:     {key}={unquote_placeholders(shlex.quote(value))}" for key, value in spec.env.items()]
    return LaunchPreview(title, lines, f"command: {unquote_placeholders(shlex.join(spec.argv))}")


def unquote_placeholders(text: str) -> str:
    """Placeholders ($PORT, $((PORT+1)), $RUN_DIR/..., $GPU0,$GPU1) stay unquoted so the shell expands them."""
    return re.sub(r"'(\$(?:\(\()?[A-Z_][^'\s]*)'", r"\1", text)
