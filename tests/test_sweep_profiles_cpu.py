"""Sweeps across server profiles on the real CPU server: failures, warm passes, per-cell metrics, GPU checks."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import cpu_profile, evalctl, only_run, write_sweep_config

from evalctl.errors import ExitCode

pytestmark = pytest.mark.server


def test_dead_profile_is_reported_and_next_profile_runs_two_warm_passes(tmp_path, data_dir, no_orphans):
    broken = cpu_profile("broken", model_path=str(tmp_path / "missing.gguf"), startup_timeout_s=60)
    cfg = write_sweep_config(
        tmp_path, data_dir, [broken, cpu_profile(context_length=2048, parallel=2)],
        limit=2, passes=2, concurrency=2, generation={"max_tokens": 8},
    )  # fmt: skip
    out = evalctl("sweep", "--config", str(cfg))
    assert out.returncode == ExitCode.RUN_FAILED, out.stdout + out.stderr
    assert "failed: broken/default cache=on" in " ".join(out.stderr.split())
    run = only_run(tmp_path / "out")
    manifest = json.loads((run / "manifest.json").read_text())
    broken, cpu = manifest["servers"]
    assert broken["status"] == "failed" and broken["exit_code"] not in (None, 0) and broken["log_tail"]
    assert manifest["failures"][0]["server"] == "broken/default cache=on"

    assert cpu["status"] == "ok", cpu.get("error")
    assert cpu["restarts"] == 0 and cpu["devices"] == []
    assert cpu["engine_version"] == cpu["info"]["version"]
    first, second = cpu["cells"]
    assert (first["pass_index"], first["flushed"]) == (1, True)
    assert (second["pass_index"], second["flushed"], second["prewarmed"]) == (2, False, False)
    for cell in (first, second):
        assert cell["metrics_after"]["tokens_predicted"] > cell["metrics_before"]["tokens_predicted"]
    # pass 2 starts where pass 1 left the cache: nothing flushed in between
    assert second["metrics_before"] == first["metrics_after"]

    df = pd.read_parquet(run / "samples.parquet")
    assert set(df.profile) == {"cpu"}
    by_pass = {p: sorted(g.doc_id) for p, g in df.groupby("pass_index")}
    assert list(by_pass) == [1, 2] and by_pass[1] == by_pass[2]
    assert (df[df.pass_index == 2].cached_tokens > 0).all()


def test_more_gpus_than_visible_fails_before_any_launch(tmp_path):
    cfg = tmp_path / "gpus.yaml"
    cfg.write_text(
        f"""
model: m
output_dir: {tmp_path / "out"}
gpus: 4
servers:
  - {{name: big, model_path: m, engine: {{name: sglang, tp: 4}}}}
  - {{name: small, model_path: m, engine: {{name: vllm, tp: 2}}}}
"""
    )
    out = evalctl("sweep", "--config", str(cfg))
    assert out.returncode == ExitCode.BAD_INPUT, out.stdout + out.stderr
    assert "need 6 GPUs (big: tp=4, small: tp=2) but 4 are visible" in " ".join(out.stderr.split())
    assert not (tmp_path / "out").exists()
