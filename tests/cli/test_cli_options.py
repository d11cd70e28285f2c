"""The options derived from the config model (cli/options.py): the same set as before, each with its field's description and key."""

from __future__ import annotations

import typer

from evalctl.cli import app
from evalctl.cli.options import OPTIONS, overrides_of
from evalctl.config import load_config
from evalctl.schema import CacheMode, SweepConfig

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


def field_of(key: str):
    model, (*sections, leaf) = SweepConfig, key.split(".")
    for section in sections:
        model = model.model_fields[section].annotation
    return model.model_fields[leaf]


def test_each_config_option_is_a_described_field_and_shows_its_description():
    shown = {p.name: p.help for p in typer.main.get_command(app).commands["sweep"].params}
    for name, option in OPTIONS.items():
        description = field_of(option.key).description
        assert description, f"config field {option.key} (--{name}) has no description"
        assert shown[name].startswith(description) and shown[name].endswith(f"(config: {option.key})")
    root = typer.main.get_command(app)
    for command in (root.commands["probe"], root.commands["servers"].commands["show"]):  # options shared with the sweep read the same
        shared = [p for p in command.params if "(config: " in (p.help or "")]
        assert shared and all(p.help == shown[p.name] for p in shared)


def test_options_reach_their_config_keys(tmp_path):
    args = ["--shots", "3,1", "--cache", "off", "--limit", "5", "--max-tokens", "7", "--variants", "default", "--gpus", "2",
            "--no-noise", "--time", "1:00:00", "--sequential", "--baseline", str(tmp_path), "--output", str(tmp_path),
            "--canary", "none"]  # fmt: skip
    ctx = typer.main.get_command(app).commands["sweep"].make_context("sweep", args)
    config = load_config(model="smollm2-135m", overrides=overrides_of({k: v for k, v in ctx.params.items() if k in OPTIONS}))
    assert (config.shots, config.cache, config.limit, config.generation.max_tokens) == ([1, 3], [CacheMode.off], 5, 7)
    assert (config.run_variants, config.gpus, config.noise, config.slurm.time) == (["default"], ["0", "1"], False, "1:00:00")
    assert (config.stopping.mode, config.stopping.baseline, config.output_dir, config.canary) == ("sequential", tmp_path, tmp_path, "none")
