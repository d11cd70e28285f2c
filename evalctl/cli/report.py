"""`evalctl report`: the self-contained HTML sign-off report of one run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evalctl.cli.common import console, fail


def report(
    run: Annotated[Path, typer.Argument(help="A run folder (results/<run>).")],
    baseline: Annotated[Path | None, typer.Option(help="A baseline run folder to compare against.")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="HTML file to write; default: <run>/report.html.")] = None,
) -> None:
    """Write one HTML file (plots embedded, no network needed): header, gate verdict and sign-off matrix,
    plots, throughput ratios, probes, flipped questions, server command lines and log links."""
    from evalctl.report.html import write_report

    for label, path in (("run", run), ("baseline", baseline)):
        if path is not None and not path.is_dir():
            raise fail(f"{label} {path} is not a directory")
    out = output or run / "report.html"
    try:
        write_report(run, out, baseline_dir=baseline)
    except (FileNotFoundError, ValueError, OSError) as exc:
        raise fail(str(exc), 1) from None
    console.print(f"report: {out}")
