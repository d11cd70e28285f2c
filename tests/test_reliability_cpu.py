"""Crashes, server deaths, signals and secrets, with real processes: evalctl and llama.cpp CPU servers."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import LAUNCHED_API_KEY, LAUNCHED_HF_TOKEN, SERVER_LAUNCHER, alias_config, only_run, processes_of

from evalctl.errors import ExitCode
from evalctl.records import CELL_KEYS, RECORD_KEYS, RECORDS_FILE

pytestmark = pytest.mark.server


def small(tmp_path: Path, data_dir: Path, *extra: str) -> list[str]:
    """The README's alias launched on GSM8K, small (its server one thread under two workers)."""
    config = alias_config(tmp_path)
    return ["sweep", "--config", str(config), "--task", "gsm8k", "--max-tokens", "16", "--data-dir", str(data_dir), *extra]


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


@pytest.mark.rotating(slice=1)
def test_server_killed_mid_cell_is_restarted_and_the_cell_completes(tmp_path, data_dir, no_orphans):
    out = tmp_path / "out"
    args = small(tmp_path, data_dir, "--shots", "1,2", "--limit", "3", "--cache", "off", "--concurrency", "1")
    proc = start(tmp_path, *args, "--output", str(out))
    wait_for(lambda: answered(out) >= 1, what="a first answer", proc=proc)
    (server,) = servers_of(out)
    server.kill()
    assert proc.wait(timeout=600) == 0, (tmp_path / "evalctl.out").read_text()
    run = only_run(out)
    entry = json.loads((run / "manifest.json").read_text())["servers"][0]
    assert entry["restarts"] == 1 and entry["restart_log"][0]["exit_code"] == -9 and entry["status"] == "ok"
    df = pd.read_parquet(run / "samples.parquet")
    assert len(df) == 6 and df.error.isna().all() and not df.duplicated(RECORD_KEYS).any()


@pytest.mark.rotating(slice=0)
def test_with_restarts_disabled_the_cell_fails_and_the_next_launch_completes(tmp_path, data_dir, no_orphans):
    out = tmp_path / "out"
    args = small(tmp_path, data_dir, "--shots", "1", "--limit", "3", "--cache", "on,off", "--concurrency", "1", "--max-restarts", "0")
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
    assert manifest["failures"][0]["failed_cells"] == ["cpu/default cache=on shots=1 conc=1 pass=1"]
    df = pd.read_parquet(run / "samples.parquet")
    on, off = df[df.cache == "on"], df[df.cache == "off"]
    assert len(off) == 3 and off.error.isna().all()
    assert len(on) == 3 and (on.error_kind == "server_died").sum() >= 1  # unanswered requests are counted as errors
    assert "died during cpu/default cache=on shots=1" in " ".join((tmp_path / "evalctl.out").read_text().split())


# SIGTERM mid-requests: test_run_folder_cpu.py, at the end of the live-readers test.
def test_sigint_mid_start_up_stops_everything_quickly(tmp_path, data_dir, no_orphans):
    out = tmp_path / "out"
    args = small(tmp_path, data_dir, "--shots", "1,2", "--limit", "3", "--cache", "on", "--concurrency", "1")
    proc = start(tmp_path, *args, "--output", str(out))
    wait_for(lambda: servers_of(out), what="a server process", proc=proc)
    run_processes = [proc.pid] + [p.pid for p in processes_of(out)]
    proc.send_signal(signal.SIGINT)
    sent = time.monotonic()
    assert proc.wait(timeout=60) == ExitCode.INTERRUPTED, (tmp_path / "evalctl.out").read_text()
    assert time.monotonic() - sent < 10
    assert not processes_of(tmp_path), run_processes
    run = only_run(out)
    assert json.loads((run / "manifest.json").read_text())["status"] == "interrupted"
    assert f"finish with: evalctl sweep --resume {run}\n" in (tmp_path / "evalctl.out").read_text()


def test_api_key_and_server_secrets_never_reach_the_run_folder(launched_run):
    run = launched_run.run
    files = [p for p in run.rglob("*") if p.is_file()]
    assert len(files) >= 5
    for path in files:
        data = path.read_bytes()
        assert LAUNCHED_API_KEY.encode() not in data and LAUNCHED_HF_TOKEN.encode() not in data, path
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["servers"][0]["env"] == {"HF_TOKEN": "<redacted>"}
    assert manifest["servers"][0]["url"].startswith("http://127.0.0.1:")  # launched servers listen on loopback
