"""docs/guide-add-engine.md, followed to the letter: one new module and its `evalctl.engines` entry point, installed
as pip would, no edit to evalctl, and the new engine runs a real sweep (llama.cpp on CPU underneath)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import guides
import pytest
import yaml

import evalctl

pytestmark = pytest.mark.server


@pytest.mark.rotating(slice=1)  # slow, and not its component's only check: rotates (docs/testing.md's slice table)
def test_a_new_engine_is_one_module_and_runs_a_sweep(tmp_path, no_orphans):
    package = Path(evalctl.__file__).parent
    before = {p: p.stat().st_mtime_ns for p in package.rglob("*.py")}
    site = tmp_path / "site"
    guides.installed(site, "guide-add-engine.md")

    config = {
        "model": "toy", "task": "prefix-recall", "shots": [40], "cache": ["on"], "limit": 2, "generation": {"max_tokens": 8},
        "output_dir": str(tmp_path / "out"),
        "servers": [{"name": "one-slot", "engine": "llamacpp-one-slot", "model_path": "bundled:smollm2-135m", "startup_timeout_s": 120}],
    }  # fmt: skip
    (tmp_path / "toy.yaml").write_text(yaml.safe_dump(config))
    env = {**os.environ, "PYTHONPATH": str(site)}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "evalctl.cli", *args], capture_output=True, text=True, env=env, timeout=600)

    shown = run("servers", "show", "--config", str(tmp_path / "toy.yaml"))
    assert shown.returncode == 0, shown.stderr
    assert "[llamacpp-one-slot]" in shown.stdout and "--parallel 1" in shown.stdout and "--ctx-per-slot 4096" in shown.stdout

    swept = run("sweep", "--config", str(tmp_path / "toy.yaml"))
    assert swept.returncode in (0, 1, 2), swept.stderr + swept.stdout  # a verdict, not a failure
    (run_dir,) = (tmp_path / "out").iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert [s["engine"] for s in manifest["servers"]] == ["llamacpp-one-slot"]
    assert manifest["servers"][0]["cells"][0]["metrics_after"]["cached_tokens"] > 0  # its metrics, under the key the checks read

    # The registry knows it, and its errors list it; a setting of another engine is refused by name.
    config["servers"][0]["engine"] = {"name": "llamacpp-one-slot", "parallel": 2}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(config))
    bad = run("servers", "show", "--config", str(tmp_path / "bad.yaml"))
    assert bad.returncode == 4 and "less than or equal to 1" in bad.stderr
    config["servers"][0]["engine"] = "no-such-engine"
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(config))
    bad = run("servers", "show", "--config", str(tmp_path / "bad.yaml"))
    known = "known: llamacpp, llamacpp-one-slot, sglang, vllm"
    assert bad.returncode == 4 and f"unknown engine 'no-such-engine'; {known}" in bad.stderr
    assert {p: p.stat().st_mtime_ns for p in package.rglob("*.py")} == before  # evalctl itself untouched
