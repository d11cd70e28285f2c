"""`evalctl servers show`: exact commands, environment and GPUs; launches nothing."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from conftest import cli

from evalctl.errors import ExitCode

TWO_PROFILES = """
model: m
servers:
  - {name: big, model_path: /models/m, gpu: H100, engine: {name: sglang, tp: 4}}
  - {name: small, model_path: /models/m, gpu: H100, engine: {name: vllm, tp: 2}}
  - {name: laptop, engine: llamacpp, model_path: "bundled:smollm2-135m"}
"""


def two_profiles(tmp_path):
    cfg = tmp_path / "two.yaml"
    cfg.write_text(TWO_PROFILES)
    return cfg


def flat(text: str) -> str:
    return " ".join(text.split())


def test_show_nemotron_nano_prints_both_cache_modes(tmp_path):
    out = cli("servers", "show", "--model", "nemotron-nano-9b", "--gpus", "1")
    assert out.returncode == 0, out.stderr
    commands = [line for line in out.stdout.splitlines() if line.startswith("command: ")]
    assert len(commands) == 2  # run_variants: [baseline] x cache on/off
    assert "--model-path nvidia/NVIDIA-Nemotron-Nano-9B-v2" in commands[0] and "--port $PORT" in commands[0]
    assert "--nccl-port $((PORT+1))" in commands[0]  # unquoted: the shell computes it
    assert "--mamba-radix-cache-strategy extra_buffer" in commands[0]
    assert commands[1].endswith("--disable-radix-cache") and not commands[0].endswith("--disable-radix-cache")
    assert flat(out.stdout).count("env: CUDA_VISIBLE_DEVICES=0") == 2


def test_a_fixed_port_is_shown_with_the_port_after_it_computed(tmp_path):
    cfg = tmp_path / "fixed.yaml"
    cfg.write_text("model: m\nservers:\n  - {name: s, model_path: /m, gpu: H100, port: 31000, engine: {name: sglang}}\n")
    out = cli("servers", "show", "--config", str(cfg), "--gpus", "1", "--cache", "on")
    assert out.returncode == 0, out.stderr
    assert "--port 31000 --nccl-port 31001" in flat(out.stdout)


def test_show_variants_needs_the_patched_interpreter(tmp_path):
    out = cli("servers", "show", "--model", "nemotron-nano-9b", "--variants", "baseline,patched", "--gpus", "1")
    assert out.returncode == ExitCode.BAD_INPUT
    assert "uses unset environment variable SGLANG_PATCHED_PYTHON" in flat(out.stderr)
    out = cli("servers", "show", "--model", "nemotron-nano-9b", "--variants", "nightly", "--gpus", "1")
    assert out.returncode == ExitCode.BAD_INPUT and "unknown variant(s) ['nightly']; known: baseline, patched" in flat(out.stderr)


def test_two_profiles_on_eight_gpus_get_disjoint_sets(tmp_path):
    cfg = two_profiles(tmp_path)
    out = cli("servers", "show", "--config", str(cfg), "--gpus", "8", "--cache", "on")
    assert out.returncode == 0, out.stderr
    devices = re.findall(r"^env:\s+CUDA_VISIBLE_DEVICES=(\S+)", out.stdout, flags=re.M)
    assert devices == ["0,1,2,3", "4,5"]
    assert "env: VLLM_SERVER_DEV_MODE=1" in flat(out.stdout)
    assert "no GPUs assigned" in out.stdout  # the llama.cpp profile

    too_few = cli("servers", "show", "--config", str(cfg), "--gpus", "0,1,2,3")
    assert too_few.returncode == ExitCode.BAD_INPUT
    assert "need 6 GPUs (big: tp=4, small: tp=2) but 4 are visible (config `gpus`)" in flat(too_few.stderr)


def test_show_without_a_visible_gpu_prints_placeholder_ids_and_a_note(tmp_path):
    bare = tmp_path / "bin"  # no nvidia-smi on PATH, no CUDA_VISIBLE_DEVICES: a laptop or a login node
    bare.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"} | {"PATH": str(bare)}
    out = subprocess.run([sys.executable, "-m", "evalctl.cli", "servers", "show", "--model", "nemotron-nano-9b"],
                         capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert flat(out.stdout).count("env: CUDA_VISIBLE_DEVICES=$GPU0") == 2
    assert "no GPU is visible here" in flat(out.stderr) and "--gpus N" in flat(out.stderr)
    argv = [sys.executable, "-m", "evalctl.cli", "servers", "show", "--config", str(two_profiles(tmp_path)), "--gpus", "2"]
    counted = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert counted.returncode == ExitCode.BAD_INPUT and "need 6 GPUs" in flat(counted.stderr)  # a count is still checked


def test_show_says_how_cache_off_reaches_a_server_at_a_url(tmp_path):
    """vLLM and llama.cpp behind a URL take a per-request cold switch; an unknown engine does not."""
    cfg = tmp_path / "urls.yaml"
    cfg.write_text(
        "model: m\nservers:\n"
        "  - {name: v, engine: vllm, url: 'http://127.0.0.1:9', model_path: m}\n"
        "  - {name: l, engine: llamacpp, url: 'http://127.0.0.1:9', model_path: m}\n"
        "  - {name: x, url: 'http://127.0.0.1:9', model_path: m}\n"
    )
    out = cli("servers", "show", "--config", str(cfg), "--cache", "off")
    assert out.returncode == 0, out.stderr
    text = flat(out.stdout)
    assert "each request is sent cold (vllm's per-request switch)" in text
    assert "each request is sent cold (llamacpp's per-request switch)" in text
    assert text.count("cache on/off is a label only") == 1
