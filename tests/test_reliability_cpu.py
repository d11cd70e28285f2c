"""Crashes, server deaths, signals and secrets, with real processes: evalctl and llama.cpp CPU servers."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import SERVER_LAUNCHER, evalctl, only_run, processes_of

from evalctl.errors import ExitCode
from evalctl.records import CELL_KEYS, RECORD_KEYS, RECORDS_FILE

pytestmark = pytest.mark.server


def small(data_dir: Path, *extra: str) -> list[str]:
    return ["sweep", "--model", "smollm2-135m", "--task", "gsm8k", "--max-tokens", "16", "--data-dir", str(data_dir), *extra]


def start(tmp_path: Path, *args: str) -> subprocess.Popen:
    # Output to a file: a full pipe would stall evalctl.
    log = open(tmp_path / "evalctl.out", "w")
    return subprocess.Popen([sys.executable, "-m", "evalctl.cli", *args], stdout=log, stderr=subprocess.STDOUT)


def wait_for(condition, timeout: float = 300, what: str = "condition", proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"evalctl exited ({proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def record_count(root: Path, answered_only: bool = False) -> int:
    lines = [line for p in root.glob(f"*/{RECORDS_FILE}") for line in p.read_bytes().splitlines()]
    return sum(1 for line in lines if not answered_only or b'"error": null' in line)


def answered(root: Path) -> int:
    return record_count(root, answered_only=True)


def servers_of(root: Path) -> list:
    return [p for p in processes_of(root) if any(SERVER_LAUNCHER in part for part in p.info["cmdline"])]


def keys(df: pd.DataFrame) -> set:
    return set(df[[*CELL_KEYS, "doc_id"]].itertuples(index=False, name=None))


def test_kill9_at_a_random_point_then_resume_equals_a_clean_run(tmp_path, data_dir, no_orphans):
    args = small(data_dir, "--shots", "1", "--limit", "3", "--cache", "on,off")
    seed = int(os.environ.get("EVALCTL_KILL_SEED", random.randrange(1 << 16)))
    kill_after = random.Random(seed).randint(0, 5)  # records on disk when evalctl dies (6 in all)
    note = f"seed {seed}, killed after {kill_after} record(s)"
    killed_root = tmp_path / "killed"
    proc = start(tmp_path, *args, "--output", str(killed_root))
    wait_for(lambda: list(killed_root.glob("*/manifest.json")) and record_count(killed_root) >= kill_after, what=note, proc=proc)
    proc.kill()
    proc.wait()
    wait_for(lambda: not processes_of(killed_root), timeout=10, what=f"servers to die with evalctl ({note})")

    run = only_run(killed_root)
    resumed = evalctl("sweep", "--resume", str(run))
    assert resumed.returncode == 0, note + resumed.stdout + resumed.stderr
    clean = evalctl(*args, "--output", str(tmp_path / "clean"))
    assert clean.returncode == 0, clean.stderr

    a = pd.read_parquet(only_run(tmp_path / "clean") / "samples.parquet")
    b = pd.read_parquet(run / "samples.parquet")
    assert not b.duplicated(RECORD_KEYS).any(), note
    assert keys(a) == keys(b) and len(b) == 6, note
    assert b.error.isna().all() and (b.run_id == run.name).all(), note
    # Greedy decoding: the same question gets the same answer, so per-question correctness and the accuracy figures match.
    both = a.merge(b, on=[*CELL_KEYS, "doc_id"], suffixes=("_clean", "_resumed"))
    assert (both.strict_correct_clean == both.strict_correct_resumed).all(), note
    acc_clean = pd.read_csv(only_run(tmp_path / "clean") / "summary.csv")
    acc_resumed = pd.read_csv(run / "summary.csv")
    columns = [*CELL_KEYS, "n", "errors", "strict_acc", "flexible_acc"]
    pd.testing.assert_frame_equal(acc_clean[columns], acc_resumed[columns])
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "complete" and len(manifest["resumes"]) == 1


def test_server_killed_mid_cell_is_restarted_and_the_cell_completes(tmp_path, data_dir, no_orphans):
    out = tmp_path / "out"
    proc = start(tmp_path, *small(data_dir, "--shots", "1,2", "--limit", "3", "--cache", "off", "--concurrency", "1"), "--output", str(out))
    wait_for(lambda: answered(out) >= 1, what="a first answer", proc=proc)
    (server,) = servers_of(out)
    server.kill()
    assert proc.wait(timeout=600) == 0, (tmp_path / "evalctl.out").read_text()
    run = only_run(out)
    entry = json.loads((run / "manifest.json").read_text())["servers"][0]
    assert entry["restarts"] == 1 and entry["restart_log"][0]["exit_code"] == -9 and entry["status"] == "ok"
    df = pd.read_parquet(run / "samples.parquet")
    assert len(df) == 6 and df.error.isna().all() and not df.duplicated(RECORD_KEYS).any()


def test_with_restarts_disabled_the_cell_fails_and_the_next_launch_completes(tmp_path, data_dir, no_orphans):
    out = tmp_path / "out"
    args = small(data_dir, "--shots", "1", "--limit", "3", "--cache", "on,off", "--concurrency", "1", "--max-restarts", "0")
    proc = start(tmp_path, *args, "--output", str(out))
    wait_for(lambda: answered(out) >= 1, what="a first answer", proc=proc)
    (server,) = servers_of(out)
    server.kill()
    assert proc.wait(timeout=600) == 3, (tmp_path / "evalctl.out").read_text()
    run = only_run(out)
    manifest = json.loads((run / "manifest.json").read_text())
    failed, ok = manifest["servers"]
    assert failed["status"] == "failed" and failed["exit_code"] == -9 and failed["log_tail"] and failed["restarts"] == 0
    assert ok["status"] == "ok" and ok["cache"] == "off"
    assert manifest["failures"][0]["failed_cells"] == ["cpu/default cache=on shots=1 pass=1"]
    df = pd.read_parquet(run / "samples.parquet")
    on, off = df[df.cache == "on"], df[df.cache == "off"]
    assert len(off) == 3 and off.error.isna().all()
    assert len(on) == 3 and (on.error_kind == "server_died").sum() >= 1  # unanswered requests are counted as errors
    assert "died during cpu/default cache=on shots=1" in " ".join((tmp_path / "evalctl.out").read_text().split())


@pytest.mark.parametrize(
    ("sig", "when", "code"), [(signal.SIGTERM, "requests", ExitCode.TERMINATED), (signal.SIGINT, "startup", ExitCode.INTERRUPTED)]
)
def test_signal_stops_everything_quickly(tmp_path, data_dir, sig, when, code, no_orphans):
    out = tmp_path / "out"
    proc = start(tmp_path, *small(data_dir, "--shots", "1,2", "--limit", "3", "--cache", "on", "--concurrency", "1"), "--output", str(out))
    if when == "startup":
        wait_for(lambda: servers_of(out), what="a server process", proc=proc)
    else:
        wait_for(lambda: answered(out) >= 1, what="a first answer", proc=proc)
    run_processes = [proc.pid] + [p.pid for p in processes_of(out)]
    proc.send_signal(sig)
    sent = time.monotonic()
    assert proc.wait(timeout=60) == code, (tmp_path / "evalctl.out").read_text()
    assert time.monotonic() - sent < 10
    assert not processes_of(tmp_path), run_processes
    run = only_run(out)
    assert json.loads((run / "manifest.json").read_text())["status"] == "interrupted"
    if when == "requests":
        assert len(pd.read_parquet(run / "samples.parquet")) >= 1
    assert f"finish with: evalctl sweep --resume {run}\n" in (tmp_path / "evalctl.out").read_text()


def test_api_key_and_server_secrets_never_reach_the_run_folder(tmp_path, data_dir, no_orphans):
    key, token = "sk-cmdline-SECRET-4711", "hf-env-SECRET-0815"
    cfg = tmp_path / "secret.yaml"
    cfg.write_text(
        f"""
model: smollm2-135m
shots: [1]
cache: ["off"]
limit: 1
data_dir: {data_dir}
output_dir: {tmp_path / "out"}
generation: {{max_tokens: 8}}
servers:
  - {{name: cpu, engine: llamacpp, model_path: "bundled:smollm2-135m", context_length: 2048, parallel: 1, env: {{HF_TOKEN: {token}}}}}
"""
    )
    out = evalctl("sweep", "--config", str(cfg), "--api-key", key)
    assert out.returncode == 0, out.stderr
    run = only_run(tmp_path / "out")
    files = [p for p in run.rglob("*") if p.is_file()]
    assert len(files) >= 5
    for path in files:
        data = path.read_bytes()
        assert key.encode() not in data and token.encode() not in data, path
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["servers"][0]["env"] == {"HF_TOKEN": "<redacted>"}
    assert manifest["servers"][0]["url"].startswith("http://127.0.0.1:")  # launched servers listen on loopback
