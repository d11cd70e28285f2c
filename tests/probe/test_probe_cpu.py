"""The probe against real CPU llama.cpp servers: healthy passes, behind the lost-prefix canary fails."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from conftest import cpu_profile, evalctl, only_run, start_canary, write_sweep_config

from evalctl.errors import ExitCode

pytestmark = pytest.mark.server

# Two small few-shot bins and no chunk-boundary bins keep these tests to seconds of prefill.
FAST_POLICY = "chunk_offsets: []\nmax_tokens: 8\n"


def probe_json(root: Path) -> dict:
    return json.loads((only_run(root) / "probe.json").read_text())


def test_probe_passes_on_healthy_server_launching_only_the_variants_the_config_runs(tmp_path, data_dir, no_orphans, monkeypatch):
    # The variant not run names an interpreter through a variable that is unset here: launching it would fail.
    monkeypatch.delenv("EVALCTL_TEST_UNSET_PYTHON", raising=False)
    variants = [{"name": "default"}, {"name": "patched", "python": "${EVALCTL_TEST_UNSET_PYTHON}/bin/python"}]
    cfg = write_sweep_config(tmp_path, data_dir, [cpu_profile(context_length=2048, parallel=2)], variants=variants,
                             run_variants=["default"])  # fmt: skip
    policy = tmp_path / "policy.yaml"
    policy.write_text(FAST_POLICY)
    out = evalctl("probe", "--config", str(cfg), "--task", "gsm8k", "--shots", "1,2", "--policy", str(policy))
    assert out.returncode == 0, out.stderr + out.stdout
    assert "patched" not in out.stdout + out.stderr
    result = probe_json(tmp_path / "out")  # probe.json: one profile x variant runs
    assert result["verdict"] == "pass" and result["failed_bins"] == []
    assert [b["bin"] for b in result["bins"]] == ["1-shot", "2-shot"]
    assert all(b["cached_tokens"] > 0 for b in result["bins"])  # warm requests really hit the cache
    assert result["divergence_unit"] == "tokens" and result["token_counts"] == "server /tokenize"
    assert 0 < result["generated_tokens"] <= 2 * 3 * 8 + 2  # 2 bins x (cold, cold, warm) x 8, one seed per bin
    assert "Probe cpu/default" in out.stdout


def test_probe_fails_behind_lost_prefix_canary(tmp_path, data_dir, no_orphans, cpu_server):
    policy = tmp_path / "policy.yaml"
    policy.write_text(FAST_POLICY)
    canary, url = start_canary(cpu_server)
    try:
        assert httpx.get(url + "/health").status_code == 200
        out = evalctl("probe", "--url", url, "--engine", "llamacpp", "--shots", "1", "--prefix-tokens", "200", "--policy", str(policy),
                      "--data-dir", str(data_dir), "--output", str(tmp_path / "out"))  # fmt: skip
    finally:
        canary.terminate()
        _, stderr = canary.communicate(timeout=30)
    assert out.returncode == ExitCode.REGRESSION, out.stderr + out.stdout
    result = probe_json(tmp_path / "out")
    assert result["verdict"] == "fail"
    assert result["failed_bins"] == ["1-shot", "prefix-200"]  # named, shortest prefix first
    assert all(b["cached_tokens"] > 0 and b["mismatch"] == 1.0 for b in result["bins"])
    assert "failed bins: 1-shot, prefix-200" in out.stdout.replace("\n", " ")
    assert "rewritten by lost-prefix" in stderr


def test_sweep_with_probe_true_writes_probe_json(tmp_path, data_dir, no_orphans, cpu_server):
    cfg = write_sweep_config(tmp_path, data_dir, [cpu_profile()], probe=True, generation={"max_tokens": 8})
    out = evalctl("sweep", "--config", str(cfg), "--url", cpu_server)
    assert out.returncode == 0, out.stderr
    run = only_run(tmp_path / "out")
    manifest = json.loads((run / "manifest.json").read_text())
    entry = manifest["servers"][0]["probe"]
    assert entry["file"] == "probe.json" and entry["verdict"] == "pass"
    assert json.loads((run / "probe.json").read_text())["bins"][0]["bin"] == "1-shot"
