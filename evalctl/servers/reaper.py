"""Kill a launched server's whole process group once evalctl is gone, even by `kill -9`.

Started beside each server (`servers.process`) as `python -m evalctl.servers.reaper EVALCTL_PID GROUP`: PDEATHSIG kills
only the server's first process, and a multi-process engine's children (vLLM's EngineCore and Worker) outlive it.
"""

from __future__ import annotations

import os
import signal
import sys
import time


def main(parent: int, group: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.2)
    try:
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the group ended on its own


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
