"""docs/guide-add-engine.md's engine installed as a distribution would be: the module and a
.dist-info whose entry_points.txt names it in the `evalctl.plugins` group, on sys.path, with no
EVALCTL_PLUGINS and no edit to evalctl. `servers show` then knows the engine (nothing launched)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml
from test_guide_add_engine import guide_module

from evalctl.errors import ExitCode


def installed(site: Path, module: str, code: str) -> None:
    """What pip leaves in site-packages for a one-module distribution with an entry point."""
    (site / f"{module}.py").write_text(code)
    info = site / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[evalctl.plugins]\nllamacpp-one-slot = {module}\n")


def test_an_engine_from_an_installed_distributions_entry_point(tmp_path: Path):
    module, code = guide_module()
    site = tmp_path / "site"
    site.mkdir()
    installed(site, Path(module).stem, code)
    config = {
        "model": "toy",
        "task": "prefix-recall",
        "shots": [40],
        "servers": [{"name": "one-slot", "engine": "llamacpp-one-slot", "model_path": "m.gguf"}],
    }
    (tmp_path / "toy.yaml").write_text(yaml.safe_dump(config))
    env = {k: v for k, v in os.environ.items() if k != "EVALCTL_PLUGINS"} | {"PYTHONPATH": str(site)}

    def show() -> subprocess.CompletedProcess:
        args = [sys.executable, "-m", "evalctl.cli", "servers", "show", "--config", str(tmp_path / "toy.yaml")]
        return subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)

    shown = show()
    assert shown.returncode == 0, shown.stderr
    assert "[llamacpp-one-slot]" in shown.stdout and "--parallel 1" in shown.stdout and "--ctx-per-slot 4096" in shown.stdout

    (site / f"{Path(module).stem}-0.1.dist-info" / "entry_points.txt").unlink()  # uninstalled: the name is unknown again
    gone = show()
    assert gone.returncode == ExitCode.BAD_INPUT and "unknown engine 'llamacpp-one-slot'; known: llamacpp, sglang, vllm" in gone.stderr
