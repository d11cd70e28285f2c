"""`evalctl dashboard`: the static release dashboard over a results root."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evalctl.cli.common import console, fail
from evalctl.errors import ExitCode


def dashboard(
    root: Annotated[
        list[Path] | None,
        typer.Option("--root", metavar="DIR", help="Results folder of run folders; repeat for several (default: results)."),
    ] = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="Folder to write the site into (created; pages are replaced).")] = Path(
        "site"
    ),
    latest: Annotated[int, typer.Option(min=1, help="Runs listed per model and configuration on the index page.")] = 14,
) -> None:
    """Write a static site over every run in the --root folders: an index of the latest runs per model and
    configuration with their verdicts, per-model trends and flip ledger, and a sign-off page per
    gated run. It opens offline from a shared disk or a CI artifact (no script, no external asset).

    Pages whose run folders did not change since the last build into --output are kept as they are.
    """
    from evalctl.dashboard.build import build_site

    if output.exists() and not output.is_dir():
        raise fail(f"--output {output} exists and is not a folder")
    try:  # a missing root is BadInput (mapped in cli.common)
        result = build_site(root or [Path("results")], output, latest)
    except OSError as exc:
        raise fail(f"cannot write the site in {output}: {exc}", ExitCode.INTERNAL) from None
    console.print(f"dashboard: {output / 'index.html'} ({len(result.written)} pages written, {len(result.skipped)} unchanged)")
