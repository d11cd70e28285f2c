"""`--executor slurm` on a real Slurm cluster (scripts/slurm-local.sh start) with llama.cpp CPU servers."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from conftest import cli, evalctl, needs_slurm, only_run, require_slurm_up
from test_reliability_cpu import start, wait_for

from evalctl.cluster.slurm import job_states, wait_until_ended
from evalctl.errors import ExitCode
from evalctl.records import RECORD_KEYS, is_final, read_records
from evalctl.runlock import writers

pytestmark = [pytest.mark.server, *needs_slurm]


@pytest.fixture(scope="module")
def slurm() -> None:
    require_slurm_up()


def two_profiles(tmp_path: Path, data_dir: Path, limit: int) -> Path:
    """Two llama.cpp profiles (one job each, one CPU each: both run at once on a 2-core node)."""
    cfg = tmp_path / "two.yaml"
    cfg.write_text(
        f"""
model: smollm2-135m
shots: [1]
cache: ["on", "off"]
limit: {limit}
concurrency: 1
data_dir: {data_dir}
generation: {{max_tokens: 16}}
slurm: {{cpus_per_task: 1, time: "00:15:00", aggregate_time: "00:10:00"}}
servers:
  - {{name: a, model_path: "bundled:smollm2-135m", engine: {{name: llamacpp, context_length: 2048, parallel: 1, threads: 1}}}}
  - {{name: b, model_path: "bundled:smollm2-135m", engine: {{name: llamacpp, context_length: 2048, parallel: 1, threads: 1}}}}
"""
    )
    return cfg


def lines(path: Path) -> int:
    return len(path.read_bytes().splitlines()) if path.is_file() else 0


def manifest(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text())


def job_of(run: Path, part: str) -> str:
    return next(j["job_id"] for j in reversed(manifest(run)["jobs"]) if j["part"] == part)


def completeness(run: Path) -> list[dict]:
    return [c for c in json.loads((run / "gate.json").read_text())["checks"] if c["kind"] == "completeness"]


def assert_every_request_once(run: Path, expected: int) -> None:
    """Each request has exactly one final row across all records files, and the samples hold all of them."""
    rows = read_records(run)
    final = rows[is_final(rows)]
    assert not final.duplicated(RECORD_KEYS).any(), "a finished request was sent again"
    samples = pd.read_parquet(run / "samples.parquet")
    assert len(samples) == expected and samples.error.isna().all()


@pytest.mark.rotating(slice=2)  # slow, and not its component's only check: rotates (docs/testing.md's slice table)
def test_sweep_on_slurm_runs_each_profile_in_its_job_side_by_side_under_a_shared_lock_then_gates(tmp_path, data_dir, slurm, no_orphans):
    root = tmp_path / "results"
    cfg = two_profiles(tmp_path, data_dir, limit=3)
    proc = start(tmp_path, "sweep", "--config", str(cfg), "--executor", "slurm", "--wait", "--output", str(root))
    wait_for(lambda: list(root.glob("*/manifest.json")), what="the run folder", proc=proc)
    run = only_run(root)
    wait_for(lambda: {h.role for h in writers(run)} == {"part a-default", "part b-default"}, what="both parts writing at once", proc=proc)
    refused = evalctl("sweep", "--resume", str(run))  # a local writer while the parts write: the manifest is theirs to share
    assert refused.returncode == ExitCode.BAD_INPUT and "part a-default" in refused.stderr, refused.stderr
    code = proc.wait(timeout=900)
    out = (tmp_path / "evalctl.out").read_text()
    gate = json.loads((run / "gate.json").read_text())
    assert code == gate["exit_code"], out
    assert all(c["status"] == "pass" for c in completeness(run))
    for part in ("a-default", "b-default"):
        assert lines(run / f"records-{part}.jsonl") == 6, part
    assert not (run / "records.jsonl").exists()
    assert_every_request_once(run, expected=12)
    assert set(pd.read_parquet(run / "samples.parquet").profile) == {"a", "b"}
    assert writers(run) == []

    m = manifest(run)
    assert m["status"] == "complete" and m["executor"] == "slurm" and m["gate"]["verdict"] == gate["verdict"]
    jobs = {j["part"]: j for j in m["jobs"]}
    assert set(jobs) == {"a-default", "b-default", "aggregate"}
    for part in ("a-default", "b-default"):
        assert jobs[part]["slurm_state"] == "COMPLETED" and jobs[part]["run_state"] == "complete" and jobs[part]["node"]
        assert f"job {jobs[part]['job_id']}: {part}" in out
    assert {s["profile"] for s in m["servers"]} == {"a", "b"}  # folded from the parts' state files
    assert (run / "summary.csv").is_file() and (run / "accuracy_vs_shots.png").is_file()

    shown = cli("jobs", str(run))
    assert shown.returncode == 0, shown.stderr
    assert all(j["job_id"] in shown.stdout for j in m["jobs"]) and "COMPLETED" in shown.stdout


@pytest.mark.rotating(slice=1)
def test_cancelled_job_gives_an_incomplete_run_and_resubmitting_completes_it(tmp_path, data_dir, slurm, no_orphans):
    root = tmp_path / "results"
    cfg = two_profiles(tmp_path, data_dir, limit=3)
    proc = start(tmp_path, "sweep", "--config", str(cfg), "--executor", "slurm", "--wait", "--output", str(root))
    wait_for(lambda: any(lines(p) for p in root.glob("*/records-a-default.jsonl")), what="profile a's first record", proc=proc)
    run = only_run(root)
    cancelled = job_of(run, "a-default")
    subprocess.run(["scancel", cancelled], check=True)
    assert proc.wait(timeout=600) != 0, (tmp_path / "evalctl.out").read_text()

    assert lines(run / "records-a-default.jsonl") < 6  # cancelled mid-run
    incomplete = [c for c in completeness(run) if c["status"] != "pass"]
    assert incomplete and any(c.get("profile") == "a" for c in incomplete), completeness(run)
    m = manifest(run)
    assert m["status"] == "incomplete" and m["parts"]["a-default"] == "interrupted"
    assert next(j for j in m["jobs"] if j["part"] == "a-default")["slurm_state"] == "CANCELLED"
    gate = cli("gate", str(run))
    assert gate.returncode == ExitCode.INCONCLUSIVE and "incomplete" in gate.stdout

    resumed = evalctl("sweep", "--resume", str(run), "--executor", "slurm", "--wait")
    assert resumed.returncode == json.loads((run / "gate.json").read_text())["exit_code"], resumed.stdout + resumed.stderr
    assert ": a-default" in resumed.stdout and ": b-default" not in resumed.stdout  # only the unfinished part
    assert all(c["status"] == "pass" for c in completeness(run))
    assert_every_request_once(run, expected=12)
    m = manifest(run)
    assert m["status"] == "complete" and len(m["jobs"]) == 5  # 3 first, then a-default and a new aggregation job


@pytest.mark.rotating(slice=1)
def test_requeued_job_resumes_without_resending_finished_requests(tmp_path, data_dir, slurm, no_orphans):
    root = tmp_path / "results"
    out = evalctl("sweep", "--config", str(two_profiles(tmp_path, data_dir, limit=3)), "--executor", "slurm", "--output", str(root))
    assert out.returncode == 0, out.stderr
    run = only_run(root)
    part = run / "records-a-default.jsonl"
    wait_for(lambda: lines(part) >= 1, what="profile a's first record")
    job = job_of(run, "a-default")
    subprocess.run(["scontrol", "requeue", job], check=True)  # what preemption with requeue does
    wait_for(lambda: job_states([job])[job].state == "PENDING", what="the requeued job to pend")
    subprocess.run(["scontrol", "update", f"jobid={job}", "StartTime=now"], check=True)  # skip Slurm's requeue delay
    wait_until_ended(job_of(run, "aggregate"), poll_s=1)

    state = json.loads((run / "jobs" / "a-default.json").read_text())
    assert state["attempts"] == 2 and state["status"] == "complete" and state["job_id"] == job
    assert state["resumes"][1]["finished_requests"] >= 1  # the second attempt took up where the first stopped
    assert_every_request_once(run, expected=12)
    assert manifest(run)["status"] == "complete"


def node_cpus() -> list[int]:
    """CPUs of every node, as `scontrol show node` reports them (evalctl asks sinfo: a second witness)."""
    out = subprocess.run(["scontrol", "show", "node", "-o"], capture_output=True, text=True, timeout=30, check=True)
    return [int(field.split("=")[1]) for line in out.stdout.splitlines() for field in line.split() if field.startswith("CPUTot=")]


def test_cpu_profile_default_request_fits_the_nodes(tmp_path, slurm):
    from evalctl.cluster.submit import part_executor
    from evalctl.config import load_config

    config = load_config(model="smollm2-135m")
    text = part_executor(tmp_path, config, config.servers[0], "part")._make_submission_file_text("python -m x", "ID")
    asked = int(text.split("#SBATCH --cpus-per-task=")[1].split()[0])
    assert asked <= max(node_cpus())


def test_job_that_can_never_start_is_reported_at_once_and_wait_is_bad_input(tmp_path, data_dir, slurm, no_orphans):
    too_many = max(node_cpus()) + 1
    out = evalctl("sweep", "--config", str(two_profiles(tmp_path, data_dir, limit=1)), "--executor", "slurm", "--wait",
                  "--cpus-per-task", str(too_many), "--output", str(tmp_path / "results"), timeout=120)  # fmt: skip
    assert out.returncode == ExitCode.BAD_INPUT, out.stdout + out.stderr
    assert "can never start (PartitionConfig)" in out.stderr and "--cpus-per-task" in out.stderr
    jobs = [j["job_id"] for j in manifest(only_run(tmp_path / "results"))["jobs"]]
    assert all(s.ended for s in job_states(jobs).values())  # cancelled: nothing left queued for ever
