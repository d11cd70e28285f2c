from __future__ import annotations

import os
import uuid
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[1]
DATA_DIR = REPO.parent / "shared" / "datasets" / "gsm8k"
SERVER_MODULE = "evalctl.servers.llamacpp_main"
# Servers inherit the environment: the tag tells this test session's servers from those of
# other sessions on the same machine, which `no_orphans` must neither blame nor kill.
SESSION_TAG = "EVALCTL_TEST_SESSION"
os.environ.setdefault(SESSION_TAG, uuid.uuid4().hex)


def _ours(proc: psutil.Process) -> bool:
    try:
        return proc.environ().get(SESSION_TAG) == os.environ[SESSION_TAG]
    except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
        return False


def server_processes() -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info.get("cmdline") or []
        if any(SERVER_MODULE in part for part in cmd) and proc.pid != os.getpid() and _ours(proc):
            found.append(proc)
    return found


@pytest.fixture
def data_dir() -> Path:
    if not (DATA_DIR / "test.jsonl").is_file():
        pytest.fail(f"offline GSM8K copy missing at {DATA_DIR}")
    return DATA_DIR


@pytest.fixture
def no_orphans():
    """Fail the test if it leaves any llama.cpp server process behind."""
    before = {p.pid for p in server_processes()}
    yield
    left = [p for p in server_processes() if p.pid not in before]
    for proc in left:
        proc.kill()
    assert not left, f"server processes left behind: {[p.pid for p in left]}"
