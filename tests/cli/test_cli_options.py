"""The sweep's and the probe's options: the same set as before they were derived from the config model (issue 35)."""

from __future__ import annotations

import typer

from evalctl.cli import app

# Captured from main before the options were generated: (names, --no- form, help panel).
SWEEP_OPTIONS = {
    ("--model", "-m"): ((), None), ("--config", "-c"): ((), None), ("--task",): ((), None), ("--include-path",): ((), None),
    ("--shots",): ((), None), ("--cache",): ((), None), ("--limit",): ((), None), ("--limit-order",): ((), None),
    ("--passes",): ((), None), ("--concurrency",): ((), None), ("--fewshot",): ((), None), ("--max-tokens",): ((), None),
    ("--output", "-o"): ((), None), ("--data-dir",): ((), None), ("--url",): ((), None), ("--engine",): ((), None),
    ("--variants",): ((), None), ("--gpus",): ((), None), ("--max-restarts",): ((), None), ("--noise",): (("--no-noise",), None),
    ("--resume",): ((), None), ("--api-key",): ((), None), ("--executor",): ((), None), ("--partition",): ((), "Slurm"),
    ("--account",): ((), "Slurm"), ("--qos",): ((), "Slurm"), ("--time",): ((), "Slurm"), ("--cpus-per-task",): ((), "Slurm"),
    ("--sequential",): ((), None), ("--baseline",): ((), None), ("--wait-for-lock",): ((), None), ("--canary",): ((), None),
    ("--wait",): (("--no-wait",), "Slurm"),
}  # fmt: skip
PROBE_OPTIONS = {
    ("--model", "-m"), ("--config", "-c"), ("--url",), ("--engine",), ("--task",), ("--shots",), ("--prefix-tokens",),
    ("--questions",), ("--max-tokens",), ("--policy",), ("--output", "-o"), ("--data-dir",), ("--api-key",),
}  # fmt: skip


def options(command: str) -> dict:
    params = typer.main.get_command(app).commands[command].params
    return {tuple(p.opts): (tuple(p.secondary_opts), getattr(p, "rich_help_panel", None)) for p in params}


def test_sweep_lists_the_options_it_always_had():
    assert options("sweep") == SWEEP_OPTIONS


def test_probe_lists_the_options_it_always_had():
    assert set(options("probe")) == PROBE_OPTIONS
