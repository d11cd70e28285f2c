"""One writer per run folder, with real evalctl processes and llama.cpp CPU servers: concurrent resumes,
kill -9, a disk that fills mid-run, and readers (gate, dashboard) of a live run."""

from __future__ import annotations

import json
import os
import random
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import LAUNCHED_FLAGS, evalctl, only_run, processes_of
from test_reliability_cpu import keys, record_count, small, start, wait_for

from evalctl.errors import ExitCode
from evalctl.records import CELL_KEYS, RECORD_KEYS, RECORDS_FILE, is_final, read_records
from evalctl.runlock import writers
from evalctl.runs import inspect_run

pytestmark = pytest.mark.server


def assert_each_request_once(run: Path, expected: int) -> None:
    rows = read_records(run)
    final = rows[is_final(rows)]
    assert not final.duplicated(RECORD_KEYS).any(), "a finished request was sent again"
    assert len(rows) == len(final) == expected, f"{len(rows)} rows for {expected} requests"
    samples = pd.read_parquet(run / "samples.parquet")
    assert len(samples) == expected and samples.error.isna().all()


def resume(run: Path, *extra: str) -> subprocess.Popen:
    argv = [sys.executable, "-m", "evalctl.cli", "sweep", "--resume", str(run), *extra]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.rotating(slice=1)  # slow, and not its component's only check: rotates (docs/testing.md's slice table)
def test_kill_9_at_a_random_point_then_two_resumes_at_once_one_writes_one_refuses_one_waits_and_it_equals_a_clean_run(
    launched_run, tmp_path, no_orphans
):
    # The shared launched sweep's config at its first shot count: that cell's rows of the launched run are the clean run.
    # Without its HF_TOKEN: a run whose config held a secret resumes only with the config given again.
    config = yaml.safe_load(launched_run.config.read_text())
    for server in config["servers"]:
        server.pop("env", None)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    args = ["sweep", "--config", str(tmp_path / "config.yaml"), *LAUNCHED_FLAGS, "--shots", "1"]
    seed = int(os.environ.get("EVALCTL_KILL_SEED", random.randrange(1 << 16)))
    kill_after = random.Random(seed).randint(0, 5)  # records on disk when evalctl dies (6 in all)
    note = f"seed {seed}, killed after {kill_after} record(s)"
    root = tmp_path / "out"
    proc = start(tmp_path, *args, "--output", str(root))
    wait_for(lambda: list(root.glob("*/manifest.json")) and record_count(root) >= kill_after, what=note, proc=proc)
    proc.kill()
    proc.wait()
    run = only_run(root)
    assert writers(run) == [], note  # kill -9 left no lock behind: nothing to clean before resuming
    wait_for(lambda: not processes_of(root), timeout=10, what=f"servers to die with evalctl ({note})")

    first = resume(run)
    # Until the lock names its holder: taken a moment ago, it reads as PID 0 (CI stopped one in that gap).
    wait_for(lambda: [w.pid for w in writers(run)] == [first.pid], timeout=120, what="the first resume to hold the lock")
    # Paused while it holds the lock, so the other two meet it however little it has left to send
    # (one request and the report can end before a new evalctl has imported: CI saw that race).
    first.send_signal(signal.SIGSTOP)
    try:
        assert [w.pid for w in writers(run)] == [first.pid], note
        second, third = resume(run), resume(run, "--wait-for-lock", "900")
        refused_out, refused_err = second.communicate(timeout=300)
        assert second.returncode == ExitCode.BAD_INPUT, refused_out + refused_err
        assert f"PID {first.pid}" in refused_err and "being written by" in refused_err and "Traceback" not in refused_err
        assert third.poll() is None  # waiting for the lock, not refused
    finally:
        first.send_signal(signal.SIGCONT)
    out, errs = first.communicate(timeout=900)
    assert first.returncode == 0, note + out + errs
    out3, errs3 = third.communicate(timeout=300)
    assert third.returncode == 0, out3 + errs3

    assert_each_request_once(run, expected=6)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    # The writer sent the rest; the waiter found nothing left; the refused one left no trace.
    resumes = manifest["resumes"]
    assert len(resumes) == 2, resumes
    assert resumes[0]["finished_requests"] >= kill_after and resumes[0]["finished_requests"] + resumes[0]["remaining_requests"] == 6
    assert (resumes[1]["finished_requests"], resumes[1]["remaining_requests"]) == (6, 0)

    clean_run = launched_run.run
    a = pd.read_parquet(clean_run / "samples.parquet").query("shots == 1")
    b = pd.read_parquet(run / "samples.parquet")
    assert keys(a) == keys(b) and len(b) == 6 and not b.duplicated(RECORD_KEYS).any(), note
    assert (b.run_id == run.name).all(), note
    # Greedy decoding: the same question gets the same answer, so per-question correctness and the accuracy figures match.
    both = a.merge(b, on=[*CELL_KEYS, "doc_id"], suffixes=("_clean", "_resumed"))
    assert (both.strict_correct_clean == both.strict_correct_resumed).all(), note
    columns = [*CELL_KEYS, "n", "errors", "strict_acc", "flexible_acc"]
    acc_clean = pd.read_csv(clean_run / "summary.csv").query("shots == 1")[columns].reset_index(drop=True)
    pd.testing.assert_frame_equal(acc_clean, pd.read_csv(run / "summary.csv")[columns])


def mount_tmpfs(where: Path, size: str) -> None:
    where.mkdir()
    out = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): {out.stderr.strip()}")


@pytest.mark.rotating(slice=0)
def test_a_disk_that_fills_mid_run_names_the_file_keeps_every_row_and_resume_finishes(tmp_path, data_dir, no_orphans):
    disk = tmp_path / "disk"
    mount_tmpfs(disk, "16m")
    try:
        root = disk / "out"
        args = small(tmp_path, data_dir, "--shots", "1", "--limit", "4", "--cache", "on,off", "--concurrency", "1")
        argv = [sys.executable, "-m", "evalctl.cli", *args, "--output", str(root)]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: record_count(root) >= 1, what="a first record", proc=proc)
        filler = disk / "filler"
        # Until the disk is full: the records file's last page has room for at most ~3 more rows (1 kB each) of 8.
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True)
        out, errs = proc.communicate(timeout=900)
        assert proc.returncode == ExitCode.INTERNAL, out + errs
        run = only_run(root)
        assert "Traceback" not in errs
        assert "No space left on device" in errs and f"cannot write {run}/" in errs, errs
        assert "Every row written so far is safe" in errs
        command = next(line.strip() for line in errs.splitlines() if line.strip().startswith("evalctl sweep --resume"))
        assert command == f"evalctl sweep --resume {run}"
        assert not processes_of(root), "a server outlived the failed sweep"
        kept = record_count(root)

        filler.unlink()
        finished = evalctl(*shlex.split(command)[1:])
        assert finished.returncode == 0, finished.stdout + finished.stderr
        assert record_count(root) >= kept  # nothing written before was lost
        assert_each_request_once(run, expected=8)
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


@pytest.mark.rotating(slice=2)  # slow, and not its component's only check: rotates (docs/testing.md's slice table)
def test_gate_and_dashboard_read_a_live_run_and_say_it_is_running_then_sigterm_stops_it_quickly(tmp_path, data_dir, no_orphans):
    root, site = tmp_path / "out", tmp_path / "site"
    # Many long answers: the run stays live for the readers (a one-thread server answers 30 in 90 s,
    # about two reads' time under load); it is stopped once they have read it twice, so its size costs nothing.
    args = small(tmp_path, data_dir, "--shots", "1", "--limit", "200", "--cache", "on", "--concurrency", "1", "--max-tokens", "128")
    proc = start(tmp_path, *args, "--output", str(root))
    wait_for(lambda: record_count(root) >= 1, what="a first record", proc=proc)
    run = only_run(root)
    reads = 0
    while proc.poll() is None and reads < 2:
        gate = evalctl("gate", str(run))
        live = proc.poll() is None
        assert gate.returncode in (0, 1, 2), gate.stdout + gate.stderr
        assert "Traceback" not in gate.stderr
        if live and (run / RECORDS_FILE).is_file():
            assert "running:" in gate.stderr and f"PID {proc.pid}" in gate.stderr, gate.stderr
            assert not (run / "gate.json").exists()  # the writer's to write, when it ends
        board = evalctl("dashboard", "--root", str(root), "-o", str(site))
        assert board.returncode == 0, board.stdout + board.stderr
        if proc.poll() is None:
            assert f'data-run="{run.name}" data-config="cpu/default" data-verdict="running"' in (site / "index.html").read_text()
            reads += 1
    assert reads >= 1, "the sweep ended before a reader saw it running"
    # SIGTERM mid-requests (test_reliability_cpu.py has SIGINT mid-start-up): evalctl stops quickly, with
    # its servers, keeps what it has, and says how to finish.
    run_processes = [proc.pid] + [p.pid for p in processes_of(root)]
    proc.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    assert proc.wait(timeout=60) == ExitCode.TERMINATED, (tmp_path / "evalctl.out").read_text()
    assert time.monotonic() - sent < 10
    assert not processes_of(tmp_path), run_processes
    assert writers(run) == [] and inspect_run(run).status == "interrupted"
    assert json.loads((run / "manifest.json").read_text())["status"] == "interrupted"
    assert len(pd.read_parquet(run / "samples.parquet")) >= 1
    assert f"finish with: evalctl sweep --resume {run}\n" in (tmp_path / "evalctl.out").read_text()
    assert not (run / "gate.json").exists()  # no reader wrote into the live run
