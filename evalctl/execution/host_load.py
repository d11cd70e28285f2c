"""How busy the machine was with other work while a cell ran: whether two cells' speeds compare.

A throughput check compares cells timed minutes apart on one machine: when another job takes CPUs
during one cell and not the other, the difference in speed is the neighbour's, not the build's. Each
cell records `host_other_cpu`: the system's busy CPU time minus this process tree's (evalctl and its
servers), over wall time times the CPU count. A server at a `url` gets none (it may run elsewhere;
here it would count as other work).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import psutil


def _busy_seconds() -> float:
    t = psutil.cpu_times()
    # Linux counts guest time inside user time: leave it out once; idle and iowait are not busy.
    idle = sum(getattr(t, name, 0.0) for name in ("idle", "iowait", "guest", "guest_nice"))
    return sum(t) - idle


def _own_seconds() -> float:
    """CPU time of this process and every process it started (the servers), reaped children included."""
    me = psutil.Process()
    total = sum(me.cpu_times()[2:4])  # children_user, children_system: the reaped ones
    for proc in [me, *me.children(recursive=True)]:
        try:
            times = proc.cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        total += times.user + times.system
    return total


@dataclass(frozen=True)
class HostLoad:
    """A reading taken when a cell starts; `other_share()` when it ends."""

    wall: float
    busy: float
    own: float

    @classmethod
    def now(cls) -> HostLoad:
        return cls(time.monotonic(), _busy_seconds(), _own_seconds())

    def other_share(self) -> float | None:
        """Share of the machine's CPUs (0-1) other processes kept busy since this reading; None if too short to tell."""
        wall = time.monotonic() - self.wall
        if wall < 0.5:
            return None  # the kernel's counters tick at 10 ms: a short cell's share is mostly rounding
        other = (_busy_seconds() - self.busy) - (_own_seconds() - self.own)
        return round(min(1.0, max(0.0, other / (wall * (psutil.cpu_count() or 1)))), 3)
