"""Kill a launched server's whole process group once evalctl is gone, even by `kill -9`.

`python -m evalctl.servers.reaper EVALCTL_PID GROUP`, started beside each server (`servers.process`). PDEATHSIG
kills only the server's first process; a multi-process engine's children outlive it (vLLM's EngineCore and Worker,
4 GB, were found orphaned), and no code of evalctl runs after SIGKILL. This waits for its parent to change (evalctl
gone), then SIGKILLs the group; a normal stop kills the reaper after the group.
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
