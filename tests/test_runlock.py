"""The run folder's writer lock with real processes: one writer, its name shown, released by the OS on kill -9."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from evalctl.errors import BadInput
from evalctl.manifest import Manifest, write_manifest
from evalctl.runlock import GRACE_S, RunLock, holder_of, run_lock_path, writers
from evalctl.runs import inspect_run

HOLD = """
import sys, time
from pathlib import Path
from evalctl.runlock import RunLock
lock = RunLock(Path(sys.argv[1]), sys.argv[2] or None).acquire(sys.argv[3], float(sys.argv[4]))
print("held", flush=True)
time.sleep(600)
"""


def start(run, role="sweep", part="", wait_s=0.0):
    return subprocess.Popen([sys.executable, "-c", HOLD, str(run), part, role, str(wait_s)], stdout=subprocess.PIPE, text=True)


def hold(run, role="sweep", part=""):
    """A process holding the run's lock (as `role`, or a part's), returned once it holds it."""
    proc = start(run, role, part)
    assert proc.stdout.readline().strip() == "held"
    return proc


@pytest.fixture
def run(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    write_manifest(folder, Manifest(run_id="run", status="running"))
    return folder


def test_a_second_writer_refuses_naming_the_holder_with_the_usage_code(run):
    proc = hold(run, "resume")
    try:
        started = time.monotonic()
        with pytest.raises(BadInput) as refused:
            RunLock(run).acquire("resume")
        assert time.monotonic() - started < GRACE_S + 2  # at once, not after a long wait
        assert isinstance(refused.value, BadInput)
        message = str(refused.value)
        assert f"PID {proc.pid}" in message and "resume" in message and "--wait-for-lock" in message
        assert [h.pid for h in writers(run)] == [proc.pid]
        assert inspect_run(run).status == "running" and str(proc.pid) in inspect_run(run).note
    finally:
        proc.kill()
        proc.wait()


def test_kill_9_frees_the_lock_at_once_and_a_manifest_left_running_reads_interrupted(run):
    proc = hold(run)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert run_lock_path(run).exists()  # the file stays; the lock does not
    assert writers(run) == []
    assert inspect_run(run).status == "interrupted"
    RunLock(run).acquire("resume").release()


def test_a_writer_waits_for_the_lock_when_asked(run):
    proc = hold(run)
    waiter = start(run, "resume", wait_s=120)
    try:
        with pytest.raises(BadInput):  # still held: the waiter is waiting, not holding
            RunLock(run).acquire("probe", wait_s=GRACE_S + 2)
        assert waiter.poll() is None
        proc.kill()
        assert waiter.stdout.readline().strip() == "held"  # it took the lock once the holder died
        assert [h.pid for h in writers(run)] == [waiter.pid]
    finally:
        for p in (proc, waiter):
            p.kill()
            p.wait()


def test_parts_write_side_by_side_but_exclude_a_whole_run_writer_and_their_twin(run):
    a, b = hold(run, part="a-default"), hold(run, part="b-default")
    try:
        assert sorted(h.role for h in writers(run)) == ["part a-default", "part b-default"]
        with pytest.raises(BadInput, match="part a-default"):
            RunLock(run).acquire("resume")
        with pytest.raises(BadInput, match="part b-default"):
            RunLock(run, "b-default").acquire("part b-default")
        assert holder_of(run_lock_path(run)) is None  # shared: no exclusive holder
    finally:
        for proc in (a, b):
            proc.kill()
            proc.wait()
    RunLock(run).acquire("aggregate").release()
