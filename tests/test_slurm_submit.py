"""What `--executor slurm` asks Slurm for, checked on the job scripts themselves (no cluster
running: submitit only wants `srun` on PATH to build them), and its refusal without Slurm."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from test_slurm_cpu import two_profiles

from evalctl.cluster.submit import part_config, part_executor
from evalctl.config import load_config
from evalctl.errors import ConfigError, ExitCode

needs_srun = pytest.mark.skipif(
    shutil.which("srun") is None, reason="no srun on PATH: submitit builds no job script without Slurm (scripts/slurm-local.sh install)"
)
SLURM_FLAGS = {"slurm.partition": "gpu", "slurm.account": "llm", "slurm.qos": "high", "slurm.time": "1-02:00:00"}


def script(tmp_path, config, profile) -> str:
    return part_executor(tmp_path, config, profile, "part")._make_submission_file_text("python -m x", "ID")


@needs_srun
def test_gpu_profile_job_asks_for_tp_gpus_and_the_flags_settings(tmp_path):
    config = load_config(model="nemotron-3-ultra", overrides=SLURM_FLAGS)
    profile = config.servers[0]
    text = script(tmp_path, config, profile)
    for line in (
        f"--gpus-per-node={profile.engine.tp}",
        "--partition=gpu",
        "--account=llm",
        "--qos=high",
        f"--time={26 * 60}",
        "--requeue",
    ):
        assert f"#SBATCH {line}\n" in text, line


@needs_srun
def test_cpu_profile_job_asks_for_no_gpus(tmp_path):
    config = load_config(
        model="smollm2-135m", overrides={"task": "gsm8k", "slurm.cpus_per_task": 2, "slurm.additional": {"constraint": "avx512"}}
    )
    text = script(tmp_path, config, config.servers[0])
    assert "gpus" not in text and "gres" not in text
    assert "#SBATCH --cpus-per-task=2\n" in text and "#SBATCH --constraint=avx512\n" in text


@needs_srun
def test_a_part_runs_one_profile_and_variant_on_the_gpus_slurm_gives_it(tmp_path):
    config = load_config(model="nemotron-3-ultra", overrides={"gpus": ["4", "5", "6", "7"]})
    server = config.servers[0]
    pinned = server.model_copy(update={"engine": server.engine.model_copy(update={"devices": ["4", "5", "6", "7"]})})
    part = part_config(config.model_copy(update={"servers": [pinned, config.servers[0].model_copy(update={"name": "other"})]}),
                       pinned, config.variants[0])  # fmt: skip
    assert [s.name for s in part.servers] == [pinned.name] and part.servers[0].engine.devices is None
    assert part.gpus is None and [v.name for v in part.active_variants()] == [config.variants[0].name]


def test_bad_slurm_time_is_a_config_error():
    with pytest.raises(ConfigError, match="slurm.time"):
        load_config(model="smollm2-135m", overrides={"task": "gsm8k", "slurm.time": "4 hours"})


# Runs with Slurm installed too: the PATH it gets holds only python.
def test_without_slurm_the_slurm_executor_fails_before_writing(tmp_path, data_dir):
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python").symlink_to(sys.executable)
    env = {**os.environ, "PATH": str(bare)}  # no sbatch, squeue, scontrol
    out = subprocess.run(
        [sys.executable, "-m", "evalctl.cli", "sweep", "--config", str(two_profiles(tmp_path, data_dir, limit=2)),
         "--executor", "slurm", "--output", str(tmp_path / "results")],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert out.returncode == ExitCode.BAD_INPUT
    assert "--executor slurm needs Slurm's commands on PATH" in out.stderr and "sbatch" in out.stderr
    assert not (tmp_path / "results").exists()
