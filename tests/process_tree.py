"""A server's process tree, watched from outside: every process ever seen below a root, and which outlived it.

The real-engine tests (vLLM, SGLang) check teardown with it: evalctl (or a ManagedServer) is the
root, the engine's processes are what must be gone after a sweep, a signal or a failed start-up.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil


class ProcessTree:
    """Every process ever seen below a root (pid and start time, so a reused pid is not mistaken for it)."""

    def __init__(self, root: int):
        self.root = root
        self.seen: dict[tuple[int, float], str] = {}

    def look(self) -> list[psutil.Process]:
        try:
            top = psutil.Process(self.root)
            procs = [top, *top.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []
        for proc in procs:
            try:
                # The latest command line: vLLM retitles its processes (VLLM::EngineCore) after they start.
                key = (proc.pid, proc.create_time())
                self.seen[key] = " ".join(proc.cmdline())[:120] or self.seen.get(key, "")
            except psutil.NoSuchProcess:
                pass
        return procs

    def saw(self, title: str) -> bool:
        """Whether a process with this title (vLLM names its EngineCore and Worker so) was ever in the tree."""
        return any(cmd.startswith(title) for cmd in self.seen.values())

    def alive(self) -> list[str]:
        left = []
        for (pid, created), cmd in self.seen.items():
            try:
                proc = psutil.Process(pid)
                if proc.create_time() == created and proc.status() != psutil.STATUS_ZOMBIE:
                    left.append(f"{pid} {cmd}")
            except psutil.NoSuchProcess:
                pass
        return left

    def wait_gone(self, timeout: float = 30) -> list[str]:
        deadline = time.monotonic() + timeout
        while (left := self.alive()) and time.monotonic() < deadline:
            time.sleep(0.2)
        return left

    def kill_all(self) -> None:
        for line in self.alive():
            try:
                psutil.Process(int(line.split()[0])).kill()
            except psutil.NoSuchProcess:
                pass


def start_evalctl(tmp_path: Path, *args: str, log: str = "evalctl.out") -> tuple[subprocess.Popen, ProcessTree]:
    out = open(tmp_path / log, "w")
    proc = subprocess.Popen([sys.executable, "-m", "evalctl.cli", *args], stdout=out, stderr=subprocess.STDOUT)
    return proc, ProcessTree(proc.pid)


def watch(proc: subprocess.Popen, tree: ProcessTree, until, timeout: float) -> None:
    """Record evalctl's process tree every 0.2 s until `until(processes)` or evalctl exits."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        if until(tree.look()):
            return
        time.sleep(0.2)
