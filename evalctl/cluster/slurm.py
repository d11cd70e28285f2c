"""Ask Slurm about jobs: is it installed, what state is each job in, wait for one to end.

States come from `squeue` (pending, running), then `scontrol show job` (ended jobs, kept
for MinJobAge), then `sacct` where accounting is on. submitit's own `job.state` needs
sacct, and `job.result()` can wait forever for a job killed before it wrote its result,
so evalctl never relies on either.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass

from evalctl.errors import BadInput, EvalctlError

# States after which a job never runs again (REQUEUED / PREEMPTED jobs go back to PENDING).
ENDED = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT"})
# What a job Slurm no longer knows (purged after MinJobAge, no accounting) is shown as.
UNKNOWN = "UNKNOWN"
COMMAND_TIMEOUT_S = 30


class SlurmUnavailable(EvalctlError):
    """Slurm refused or did not answer (submission, release): exit 1."""


class NoSlurm(BadInput):
    """`--executor slurm` on a host without Slurm's commands: a usage error (exit 2), found before anything is written."""


@dataclass(frozen=True)
class JobState:
    job_id: str
    state: str  # Slurm's: PENDING, RUNNING, COMPLETED, CANCELLED, ... or UNKNOWN
    node: str | None = None
    reason: str | None = None

    @property
    def ended(self) -> bool:
        return self.state in ENDED or self.state == UNKNOWN


def require_slurm() -> None:
    """Fail before anything is written or submitted when this host cannot submit Slurm jobs."""
    missing = [cmd for cmd in ("sbatch", "squeue", "scontrol") if shutil.which(cmd) is None]
    if missing:
        raise NoSlurm(
            f"--executor slurm needs Slurm's commands on PATH, but {', '.join(missing)} not found; "
            "run on a Slurm login node (or use --executor local)"
        )


def _run(argv: list[str]) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None


def _squeue(ids: list[str]) -> dict[str, JobState]:
    out = _run(["squeue", "-h", "-j", ",".join(ids), "-o", "%i|%T|%N|%r"])
    states = {}
    for line in out.stdout.splitlines() if out and out.returncode == 0 else []:
        job_id, state, node, reason = (line.split("|") + ["", "", ""])[:4]
        states[job_id] = JobState(job_id, state, node or None, None if reason in ("", "None") else reason)
    return states


def _scontrol(job_id: str) -> JobState | None:
    out = _run(["scontrol", "show", "job", "-o", job_id])
    if not out or out.returncode != 0:
        return None
    fields = dict(item.split("=", 1) for item in out.stdout.split() if "=" in item)
    if "JobState" not in fields:
        return None
    node = fields.get("NodeList")
    reason = fields.get("Reason")
    return JobState(job_id, fields["JobState"], None if node in (None, "(null)") else node, None if reason in (None, "None") else reason)


def _sacct(ids: list[str]) -> dict[str, JobState]:
    if shutil.which("sacct") is None:
        return {}
    out = _run(["sacct", "-n", "-P", "-X", "-j", ",".join(ids), "-o", "JobID,State,NodeList"])
    states = {}
    for line in out.stdout.splitlines() if out and out.returncode == 0 else []:
        job_id, state, node = (line.split("|") + ["", ""])[:3]
        # "CANCELLED by 0" -> CANCELLED
        states[job_id] = JobState(job_id, state.split()[0] if state else UNKNOWN, node if node not in ("", "None assigned") else None)
    return states


def job_states(job_ids: Iterable[str]) -> dict[str, JobState]:
    """Each job's state from the first Slurm source that knows it; UNKNOWN when none does."""
    ids = list(dict.fromkeys(str(j) for j in job_ids))
    states = _squeue(ids) if ids else {}
    for job_id in ids:
        if job_id not in states:
            found = _scontrol(job_id)
            if found:
                states[job_id] = found
    rest = [j for j in ids if j not in states]
    if rest:
        states.update(_sacct(rest))
    return {j: states.get(j, JobState(j, UNKNOWN)) for j in ids}


def wait_until_ended(job_id: str, poll_s: float = 5.0) -> JobState:
    """Block until Slurm says the job ended (or forgot it)."""
    while True:
        state = job_states([job_id])[job_id]
        if state.ended:
            return state
        time.sleep(poll_s)


def release(job_id: str) -> None:
    out = _run(["scontrol", "release", job_id])
    if not out or out.returncode != 0:
        raise SlurmUnavailable(f"cannot release held job {job_id}: {(out.stderr.strip() if out else 'scontrol failed')}")
