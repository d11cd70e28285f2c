"""docs/guide-add-engine.md's engine installed as pip installs a distribution: the module and a
.dist-info whose entry_points.txt names its adapter in the `evalctl.engines` group, on sys.path, with
no edit to evalctl. `servers show` then knows the engine (nothing launched), and not once uninstalled."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import guides
import yaml

from evalctl.errors import ExitCode


def test_an_engine_from_an_installed_distributions_entry_point(tmp_path: Path):
    site = tmp_path / "site"
    guides.installed(site, "guide-add-engine.md")
    config = {
        "model": "toy",
        "task": "prefix-recall",
        "shots": [40],
        "servers": [{"name": "one-slot", "engine": "llamacpp-one-slot", "model_path": "m.gguf"}],
    }
    (tmp_path / "toy.yaml").write_text(yaml.safe_dump(config))
    env = {**os.environ, "PYTHONPATH": str(site)}

    def show() -> subprocess.CompletedProcess:
        args = [sys.executable, "-m", "evalctl.cli", "servers", "show", "--config", str(tmp_path / "toy.yaml")]
        return subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)

    shown = show()
    assert shown.returncode == 0, shown.stderr
    assert "[llamacpp-one-slot]" in shown.stdout and "--parallel 1" in shown.stdout and "--ctx-per-slot 4096" in shown.stdout

    (info,) = site.glob("*.dist-info")
    shutil.rmtree(info)  # uninstalled: the name is unknown again
    gone = show()
    assert gone.returncode == ExitCode.BAD_INPUT and "unknown engine 'llamacpp-one-slot'; known: llamacpp, sglang, vllm" in gone.stderr
