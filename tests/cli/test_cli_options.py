"""The options generated from the config model (cli/options.py): the same names as before, each with its field's
description, key and default; --set reaching any field; a plug-in engine's marked setting an option with no CLI edit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
import yaml
from conftest import cli
from guides import dist_info

from evalctl.cli import app
from evalctl.cli.options import OPTIONS, overrides_of
from evalctl.config import load_config
from evalctl.errors import ConfigError, ExitCode
from evalctl.schema import CacheMode

# Captured from main before the options were generated: (names, --no- form, help panel); --set and --side-by-side are new.
SWEEP_OPTIONS = {
    ("--model", "-m"): ((), None), ("--config", "-c"): ((), None), ("--task",): ((), None), ("--include-path",): ((), None),
    ("--shots",): ((), None), ("--cache",): ((), None), ("--limit",): ((), None), ("--limit-order",): ((), None),
    ("--passes",): ((), None), ("--concurrency",): ((), None), ("--fewshot",): ((), None), ("--max-tokens",): ((), None),
    ("--output", "-o"): ((), None), ("--data-dir",): ((), None), ("--url",): ((), None), ("--engine",): ((), None),
    ("--variants",): ((), None), ("--gpus",): ((), None), ("--max-restarts",): ((), None), ("--noise",): (("--no-noise",), None),
    ("--resume",): ((), None), ("--api-key",): ((), None), ("--executor",): ((), None), ("--partition",): ((), "Slurm"),
    ("--account",): ((), "Slurm"), ("--qos",): ((), "Slurm"), ("--time",): ((), "Slurm"), ("--cpus-per-task",): ((), "Slurm"),
    ("--sequential",): ((), None), ("--baseline",): ((), None), ("--wait-for-lock",): ((), None), ("--workload",): ((), None),
    ("--canary",): ((), None),
    ("--wait",): (("--no-wait",), "Slurm"), ("--set",): ((), None), ("--side-by-side",): ((), None), ("--follow",): ((), None),
}  # fmt: skip
PROBE_OPTIONS = {
    ("--model", "-m"), ("--config", "-c"), ("--url",), ("--engine",), ("--task",), ("--shots",), ("--prefix-tokens",),
    ("--questions",), ("--max-tokens",), ("--policy",), ("--output", "-o"), ("--data-dir",), ("--api-key",), ("--set",),
}  # fmt: skip


def command(*path: str) -> typer.core.TyperCommand:
    found = typer.main.get_command(app)
    for name in path:
        found = found.commands[name]
    return found


def options(*path: str) -> dict:
    return {tuple(p.opts): (tuple(p.secondary_opts), getattr(p, "rich_help_panel", None)) for p in command(*path).params}


def test_sweep_lists_the_options_it_always_had():
    assert options("sweep") == SWEEP_OPTIONS


def test_probe_lists_the_options_it_always_had():
    assert set(options("probe")) == PROBE_OPTIONS


def test_each_config_option_shows_its_fields_description_key_and_default():
    shown = {p.name: p.help for p in command("sweep").params}
    for name, option in OPTIONS.items():
        assert option.field.description, f"config field {option.key} (--{name}) has no description"
        assert shown[name].startswith(option.field.description) and f"(config: {option.key}" in shown[name]
    assert shown["concurrency"].endswith("(config: concurrency; default 4)")
    assert shown["noise"].endswith("(config: noise; default --no-noise)")
    assert shown["max_tokens"].endswith("(config: generation.max_tokens; default 256)")
    assert shown["limit"].endswith("(config: limit)")  # no default but the whole split, which its description says
    for path in (("probe",), ("servers", "show")):  # options shared with the sweep read the same
        shared = [p for p in command(*path).params if "(config: " in (p.help or "")]
        assert shared and all(p.help == shown[p.name] for p in shared)


def resolved(*args: str, model: str = "smollm2-135m"):
    """The config the sweep would run with `args`, through its own parsing (nothing launched)."""
    params = command("sweep").make_context("sweep", list(args)).params
    return load_config(model=model, overrides=overrides_of({k: v for k, v in params.items() if k in OPTIONS}, params["set_fields"] or []))


def test_options_reach_their_config_keys(tmp_path):
    config = resolved(
        "--shots", "3,1", "--cache", "off", "--limit", "5", "--max-tokens", "7", "--variants", "default", "--gpus", "2",
        "--no-noise", "--time", "1:00:00", "--sequential", "--baseline", str(tmp_path), "--output", str(tmp_path),
        "--canary", "none", "--fewshot", "sampled",
    )  # fmt: skip
    assert (config.shots, config.cache, config.limit, config.generation.max_tokens) == ([1, 3], [CacheMode.off], 5, 7)
    assert (config.run_variants, config.gpus, config.noise, config.slurm.time) == (["default"], ["0", "1"], False, "1:00:00")
    assert (config.stopping.mode, config.stopping.baseline, config.output_dir, config.canary) == ("sequential", tmp_path, tmp_path, "none")
    assert config.fewshot == "sampled" and resolved("--gpus", "2,5").gpus == ["2", "5"]


def test_a_task_yaml_is_recorded_by_its_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    params = command("sweep").make_context("sweep", ["--task", "mine.yaml", "--include-path", "tasks"]).params
    overrides = overrides_of({"task": params["task"], "include_path": params["include_path"]}, [])
    assert overrides == {"task": str(tmp_path / "mine.yaml"), "include_path": tmp_path / "tasks"}
    assert overrides_of({"task": "gsm8k"}, []) == {"task": "gsm8k"}  # a name stays a name


def test_set_reaches_nested_fields_and_list_items_with_yaml_values():
    config = resolved(
        "--task", "gsm8k", "--set", "generation.temperature=0.5", "--set", "shots=[4, 2]", "--set", "limit=null",
        "--set", "servers.0.engine.threads=1", "--set", "slurm.additional={constraint: h100}", "--set", "probe=true",
    )  # fmt: skip
    assert (config.generation.temperature, config.shots, config.limit, config.probe) == (0.5, [2, 4], None, True)
    assert (config.servers[0].engine.threads, config.slurm.additional) == (1, {"constraint": "h100"})


def test_set_on_every_profile_whose_engine_takes_the_setting():
    config = resolved("--set", "servers.*.engine.threads=2")
    assert [s.engine.threads for s in config.servers] == [2]
    with pytest.raises(ConfigError, match="no server profile's engine takes the setting 'tp'"):
        resolved("--set", "servers.*.engine.tp=2")


@pytest.mark.parametrize(
    ("args", "told"),
    [
        (["--set", "generation.temprature=0.5"], "generation.temprature: unknown field (given as an option)"),
        (["--set", "nope.deeper=1"], "nope: unknown field (given as an option)"),
        (["--set", "servers.0.port=high"], "servers.0.port: Input should be a valid integer"),
        (["--set", "servers.0.engine.tp=2"], "servers.0.engine.tp: not a setting of engine 'llamacpp'"),
        (["--set", "servers.4.port=8000"], "cannot set servers.4.port: '4' is not an index of its list (0 to 0)"),
        (["--set", "limit"], "Invalid value for '--set': not KEY=VALUE: 'limit'"),
        (["--set", "limit=[1"], "Invalid value for '--set': limit: not a YAML value"),
        (["--cache", "on", "--set", "cache=[off]"], "Invalid value for '--set': cache is set by an option as well"),
    ],
)
def test_a_bad_field_is_bad_input_naming_it(args, told):
    out = cli("servers", "show", "--model", "smollm2-135m", *args)
    assert out.returncode == ExitCode.BAD_INPUT
    assert told in " ".join(out.stderr.split())


# A plug-in engine whose one new setting is marked as an option; nothing in evalctl/cli names it.
PLUGIN = """
from typing import Annotated, Literal

from pydantic import Field

from evalctl.schema import Cli
from evalctl.servers.engines.llamacpp import LlamaCppAdapter, LlamaCppSettings


class BatchSettings(LlamaCppSettings):
    name: Literal["llamacpp-batch"] = "llamacpp-batch"
    batch_tokens: Annotated[int | None, Cli()] = Field(None, ge=1, description="Tokens per prefill batch.")


class BatchAdapter(LlamaCppAdapter):
    name = "llamacpp-batch"
    Settings = BatchSettings
    detect_routes = ()
"""
# The sweep's option parsed and applied as the sweep does (nothing launched), in a process that imports the plug-in.
PARSE = """
import json, sys, typer
from evalctl.cli import app
from evalctl.cli.options import OPTIONS, overrides_of
from evalctl.config import load_config
from evalctl.errors import ConfigError
params = typer.main.get_command(app).commands["sweep"].make_context("sweep", sys.argv[1:]).params
try:
    config = load_config(config_file=params["config"], overrides=overrides_of({k: v for k, v in params.items() if k in OPTIONS}, []))
    print(json.dumps([getattr(s.engine, "batch_tokens", "none") for s in config.servers]))
except ConfigError as exc:
    print(json.dumps(str(exc)))
"""


def test_a_plugin_engines_marked_setting_is_a_sweep_option_with_no_cli_edit(tmp_path: Path):
    (tmp_path / "evalctl_batch.py").write_text(PLUGIN)
    dist_info(tmp_path, "evalctl-batch", {"evalctl.engines": {"llamacpp-batch": "evalctl_batch:BatchAdapter"}})
    servers = [{"name": "batched", "engine": "llamacpp-batch", "model_path": "m.gguf"}, {"name": "plain", "model_path": "m.gguf"}]
    (tmp_path / "two.yaml").write_text(yaml.safe_dump({"model": "two", "servers": servers}))
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "COLUMNS": "80"}

    def run(*args: str) -> str:
        done = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout

    shown = " ".join(run("-m", "evalctl.cli", "sweep", "--help").replace("│", " ").split())
    assert "Engine settings" in shown and "--batch-tokens <int> Tokens per prefill batch." in shown
    assert "(config: servers.*.engine.batch_tokens of each profile whose engine takes it: llamacpp-batch)" in shown
    config = str(tmp_path / "two.yaml")
    assert json.loads(run("-c", PARSE, "--config", config, "--batch-tokens", "64")) == [64, "none"]  # the plain llama.cpp: untouched
    told = json.loads(run("-c", PARSE, "--config", config, "--batch-tokens", "0"))
    assert "servers.0.engine.batch_tokens: Input should be greater than or equal to 1 (given as an option)" in told
