"""Ask Slurm about jobs: is it installed, what state is each job in, wait for one to end.

States come from `squeue` (pending, running), then `scontrol show job` (ended jobs, kept for MinJobAge), then
`sacct` where accounting is on. evalctl never relies on submitit's `job.state` (it needs sacct) or `job.result()`
(it can wait forever for a job killed before it wrote its result).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass

from evalctl.errors import BadInput, NeverStarts, RunFailed
from evalctl.schema import SLURM_TIME

# States after which a job never runs again (REQUEUED / PREEMPTED jobs go back to PENDING).
ENDED = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT"})
# Pending reasons after which a job never starts as submitted: it asks for more than the
# partition's nodes or limits allow (with EnforcePartLimits=NO, sbatch accepts such jobs).
NEVER_STARTS = {
    "PartitionConfig": "it asks for more CPUs, memory or GPUs than a node of its partition has",
    "PartitionNodeLimit": "it asks for more nodes than its partition allows",
    "PartitionTimeLimit": "its time limit exceeds its partition's",
    "BadConstraints": "no node of its partition has the features or resources it asks for",
}
# What a job Slurm no longer knows (purged after MinJobAge, no accounting) is shown as.
UNKNOWN = "UNKNOWN"
COMMAND_TIMEOUT_S = 30


def slurm_minutes(text: str) -> int:
    """A Slurm time limit (the config checked its form, `schema.SLURM_TIME`) in whole minutes, rounded up."""
    days, *rest = SLURM_TIME.fullmatch(text.strip()).groups()
    parts = [int(p) for p in rest if p is not None]
    if days is not None:  # D-H, D-H:M, D-H:M:S
        seconds = int(days) * 86400 + sum(v * m for v, m in zip(parts, (3600, 60, 1)))
    else:  # M, M:S, H:M:S
        seconds = sum(v * m for v, m in zip(parts, {1: (60,), 2: (60, 1), 3: (3600, 60, 1)}[len(parts)]))
    return max(1, -(-seconds // 60))


@dataclass(frozen=True)
class NodeResources:
    cpus: int
    memory_mb: int
    gres: str | None


@dataclass(frozen=True)
class JobState:
    job_id: str
    state: str  # Slurm's: PENDING, RUNNING, COMPLETED, CANCELLED, ... or UNKNOWN
    node: str | None = None
    reason: str | None = None

    @property
    def ended(self) -> bool:
        return self.state in ENDED or self.state == UNKNOWN

    @property
    def never_starts(self) -> bool:
        return self.state == "PENDING" and self.reason in NEVER_STARTS


def require_slurm() -> None:
    """Fail before anything is written or submitted when this host cannot submit Slurm jobs
    (submitit, the `slurm` extra, missing; or Slurm's commands)."""
    from evalctl.extras import require

    require("submitit", "--executor slurm")
    missing = [cmd for cmd in ("sbatch", "squeue", "scontrol") if shutil.which(cmd) is None]
    if missing:
        raise BadInput(
            f"--executor slurm needs Slurm's commands on PATH, but {', '.join(missing)} not found; "
            "run on a Slurm login node (or use --executor local)"
        )


def _run(argv: list[str]) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None


def _rows(argv: list[str], width: int) -> list[list[str]]:
    """The `|`-separated lines a Slurm command prints, each padded to `width` fields; [] when it fails."""
    out = _run(argv)
    lines = out.stdout.splitlines() if out and out.returncode == 0 else []
    return [(line.split("|") + [""] * width)[:width] for line in lines]


def _squeue(ids: list[str]) -> dict[str, JobState]:
    return {
        job_id: JobState(job_id, state, node or None, None if reason in ("", "None") else reason)
        for job_id, state, node, reason in _rows(["squeue", "-h", "-j", ",".join(ids), "-o", "%i|%T|%N|%r"], 4)
    }


def _scontrol(job_id: str) -> JobState | None:
    out = _run(["scontrol", "show", "job", "-o", job_id])
    fields = dict(item.split("=", 1) for item in out.stdout.split() if "=" in item) if out and out.returncode == 0 else {}
    if "JobState" not in fields:
        return None
    node, reason = fields.get("NodeList"), fields.get("Reason")
    return JobState(job_id, fields["JobState"], None if node in (None, "(null)") else node, None if reason in (None, "None") else reason)


def _sacct(ids: list[str]) -> dict[str, JobState]:
    if shutil.which("sacct") is None:
        return {}
    # A state "CANCELLED by 0" is CANCELLED.
    return {
        job_id: JobState(job_id, state.split()[0] if state else UNKNOWN, node if node not in ("", "None assigned") else None)
        for job_id, state, node in _rows(["sacct", "-n", "-P", "-X", "-j", ",".join(ids), "-o", "JobID,State,NodeList"], 3)
    }


def job_states(job_ids: Iterable[str]) -> dict[str, JobState]:
    """Each job's state from the first Slurm source that knows it; UNKNOWN when none does."""
    ids = list(dict.fromkeys(str(j) for j in job_ids))
    states = _squeue(ids) if ids else {}
    states |= {j: found for j in ids if j not in states and (found := _scontrol(j))}
    rest = [j for j in ids if j not in states]
    states |= _sacct(rest) if rest else {}
    return {j: states.get(j, JobState(j, UNKNOWN)) for j in ids}


def partition_nodes(partition: str | None) -> list[NodeResources]:
    """What each node of `partition` (default: the cluster's default partition) has; [] when sinfo cannot say."""
    argv = ["sinfo", "-h", "-N", "-o", "%P|%c|%m|%G"] + (["-p", partition] if partition else [])
    return [
        NodeResources(int(cpus.rstrip("+")), int(memory.rstrip("+")), None if gres in ("", "(null)") else gres)
        for part, cpus, memory, gres in _rows(argv, 4)
        if partition or part.endswith("*")  # sinfo marks the default partition with *
    ]


def fitting_cpus(partition: str | None, wanted: int) -> int:
    """`wanted` CPUs, or fewer when no node of the partition has that many (a job asking more never starts)."""
    nodes = partition_nodes(partition)
    return min(wanted, max(n.cpus for n in nodes)) if nodes else wanted


def check_startable(job_ids: Iterable[str], partition: str | None, settle_s: float = 0.0) -> None:
    """NeverStarts when any of the jobs is pending for a reason that never clears by itself; `settle_s`: how long to
    wait for the scheduler to give fresh jobs a pending reason."""
    ids = list(job_ids)
    deadline = time.monotonic() + settle_s
    while True:
        states = job_states(ids).values()
        stuck = [s for s in states if s.never_starts]
        if stuck:
            raise never_starts(stuck, partition)
        if time.monotonic() >= deadline or not any(s.state == "PENDING" and s.reason is None for s in states):
            return
        time.sleep(0.5)


def wait_until_ended(job_id: str, poll_s: float = 5.0, *, watch: Iterable[str] = (), partition: str | None = None) -> JobState:
    """Block until Slurm says the job ended (or forgot it); NeverStarts as soon as a `watch`ed job never can."""
    watch = list(watch)
    while True:
        if watch:
            check_startable(watch, partition)
        state = job_states([job_id])[job_id]
        if state.ended:
            return state
        time.sleep(poll_s)


def cancel(job_ids: Iterable[str]) -> None:
    _run(["scancel", *job_ids])


def release(job_id: str) -> None:
    out = _run(["scontrol", "release", job_id])
    if not out or out.returncode != 0:
        raise RunFailed(f"cannot release held job {job_id}: {(out.stderr.strip() if out else 'scontrol failed')}")


def never_starts(stuck: list[JobState], partition: str | None) -> NeverStarts:
    """The error for pending jobs Slurm will never start: why, and what to change."""
    nodes = partition_nodes(partition)
    have = ", ".join(sorted({f"{n.cpus} CPUs and {n.memory_mb} MB" + (f", {n.gres}" if n.gres else "") for n in nodes}))
    lines = [f"job {s.job_id} can never start ({s.reason}): {NEVER_STARTS[s.reason]}" for s in stuck]
    lines.append(
        f"nodes of partition {partition or '(default)'} have {have or 'nothing Slurm reports'}; lower --cpus-per-task "
        "(config slurm.cpus_per_task), slurm.mem_gb or --time, or choose another --partition"
    )
    return NeverStarts("\n".join(lines))
