"""The `evalctl` command line: parse, call, print. No computation lives here."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from evalctl import __version__
from evalctl.config import CacheMode, ConfigError, SweepConfig, load_config, with_external_url

app = typer.Typer(
    help="Catch accuracy regressions in served language models: sweep few-shot count x prefix cache "
    "x server configuration, then analyse with paired statistics.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err = Console(stderr=True)

EXIT_USAGE = 2
EXIT_FAILED_CELLS = 3
EXIT_SIGINT = 130
EXIT_SIGTERM = 143


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so every `finally` (server teardown) runs."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated()


def _fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    err.print(f"[red]error:[/red] {message}", highlight=False)
    return typer.Exit(code)


def _csv_ints(text: str | None, name: str) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise _fail(f"{name} must be comma-separated integers, got {text!r}") from None


def _csv(text: str | None) -> list[str] | None:
    return None if text is None else [x.strip() for x in text.split(",") if x.strip()]


def _version(value: bool) -> None:
    if value:
        console.print(f"evalctl {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[Optional[bool], typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")] = None,
) -> None:
    """evalctl: accuracy-regression sweeps for served LLMs."""


def resolve_config(
    model: str | None, config: Path | None, url: str | None, overrides: dict
) -> SweepConfig:
    try:
        resolved = load_config(model=model, config_file=config, overrides=overrides)
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    return with_external_url(resolved, url) if url else resolved


@app.command()
def sweep(
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="Model alias: a file in configs/ (e.g. smollm2-135m).")] = None,
    config: Annotated[Optional[Path], typer.Option("--config", "-c", help="Sweep config YAML file (instead of --model).")] = None,
    shots: Annotated[Optional[str], typer.Option(help="Few-shot counts, comma-separated, e.g. 8,12,16,20.")] = None,
    cache: Annotated[Optional[str], typer.Option(help="Prefix-cache modes to run: on,off (or one of them).")] = None,
    limit: Annotated[Optional[int], typer.Option(help="Questions per cell (default: the config's; all when unset).")] = None,
    passes: Annotated[Optional[int], typer.Option(help="Warm passes per cell, run without a cache flush between.")] = None,
    concurrency: Annotated[Optional[int], typer.Option(help="Requests in flight per server.")] = None,
    fewshot: Annotated[Optional[str], typer.Option(help="Few-shot mode: shared (first k train examples, one shared prefix) or sampled (lm-eval's per-question sampling).")] = None,
    max_tokens: Annotated[Optional[int], typer.Option(help="Completion budget per question.")] = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Results root; the run folder is created inside it.")] = None,
    data_dir: Annotated[Optional[Path], typer.Option(help="Local dataset copy with train.jsonl and test.jsonl (env EVALCTL_DATA_DIR); default: the Hugging Face hub.")] = None,
    url: Annotated[Optional[str], typer.Option(help="Use an already-running OpenAI-compatible server at this base URL instead of launching one.")] = None,
    api_key: Annotated[Optional[str], typer.Option(envvar=["EVALCTL_API_KEY", "OPENAI_API_KEY"], show_envvar=True, help="Bearer token sent to the server; never written to disk.")] = None,
) -> None:
    """Launch server(s), run GSM8K at each shot count with the prefix cache on and off, and report.

    Exit status: 0 all cells ran; 3 some server or cell failed (see summary); 2 bad input;
    130/143 interrupted by SIGINT/SIGTERM.
    """
    from evalctl.execution import Sweep
    from evalctl.report.progress import RichProgress
    from evalctl.servers.process import ServerError

    if cache is not None:
        modes = _csv(cache) or []
        bad = [m for m in modes if m not in {c.value for c in CacheMode}]
        if bad:
            raise _fail(f"--cache takes on and/or off, got {bad}")
    overrides = {
        "shots": _csv_ints(shots, "--shots"),
        "cache": _csv(cache),
        "limit": limit,
        "passes": passes,
        "concurrency": concurrency,
        "fewshot": fewshot,
        "output_dir": output,
        "data_dir": data_dir,
        "generation.max_tokens": max_tokens,
    }
    resolved = resolve_config(model, config, url, overrides)

    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    runner = Sweep(resolved, api_key=api_key)
    try:
        with RichProgress(console) as progress:
            runner.progress = progress
            result = runner.run()
    except KeyboardInterrupt as exc:
        code = EXIT_SIGTERM if isinstance(exc, Terminated) else EXIT_SIGINT
        err.print(f"interrupted; records so far are in {runner.run_dir}")
        raise typer.Exit(code) from None
    except (ConfigError, ServerError, OSError) as exc:
        raise _fail(str(exc), 1) from None
    finally:
        signal.signal(signal.SIGTERM, previous)

    _print_run(result.run_dir)
    for failure in result.failures:
        err.print(f"[red]failed:[/red] {failure['server']}: {failure['error']}")
    console.print(f"run folder: {result.run_dir}")
    if result.failures:
        raise typer.Exit(EXIT_FAILED_CELLS)


def _print_run(run_dir: Path) -> None:
    from evalctl.manifest import read_manifest
    from evalctl.records import load_samples
    from evalctl.report.outputs import summarize, write_outputs
    from evalctl.report.terminal import accuracy_view, frame_table, throughput_view

    try:
        samples = load_samples(run_dir)
        manifest = read_manifest(run_dir)
    except (FileNotFoundError, ValueError, OSError) as exc:
        raise _fail(str(exc), 1) from None
    summary = summarize(samples)
    cfg = manifest.get("config", {})
    write_outputs(run_dir, summary, title=f"{cfg.get('model', '?')} {cfg.get('task', '')} ({manifest.get('run_id', run_dir.name)})")
    console.print(frame_table(accuracy_view(summary.accuracy), "Accuracy by cell (95% Wilson)"))
    console.print(frame_table(accuracy_view(summary.by_length.drop(columns=["bin_lo", "bin_hi"])), "Accuracy by prefill length (prompt tokens)"))
    console.print(frame_table(throughput_view(summary.throughput), "Throughput by cell"))


@app.command()
def analyze(run: Annotated[Path, typer.Argument(help="A run folder (results/<run>).", exists=False)]) -> None:
    """Rebuild tables, summary.csv and plots for a run from its records alone (no server)."""
    if not run.is_dir():
        raise _fail(f"{run} is not a directory")
    _print_run(run)
    console.print(f"run folder: {run}")


if __name__ == "__main__":
    app()
