"""The run folder a sweep writes: created new, or an interrupted one taken up; its state saved as it goes.

A part (`part=`: a cluster job's slice, one profile x variant) keeps its state in its own file, never touching the
run's manifest. The writer lock is held from creation or take-up until `release`, and a resumed run's state read only
once it is held: a writer that waited for another sees everything that one wrote.
"""

from __future__ import annotations

import errno
import os
import shlex
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path

from evalctl.errors import DiskError
from evalctl.fsio import disk_error
from evalctl.manifest import (
    Failure,
    Manifest,
    ResumeEntry,
    RunState,
    evalctl_info,
    host_info,
    new_run_id,
    now,
    read_manifest,
    read_part_state,
    write_manifest,
    write_part_state,
)
from evalctl.plan import Plan
from evalctl.records import record_files
from evalctl.resume import RequestKey, check_same_plan, check_same_prompts, data_fingerprint, finished_keys, planned_keys
from evalctl.runlock import RunLock
from evalctl.runs import Run
from evalctl.secrets import redact_config
from evalctl.tasks.registry import resolved_data_dir


@dataclass
class RunFolder:
    """One writer's view of a run folder: the run's manifest, or (`part`) that part's state."""

    path: Path
    run_id: str
    state: RunState
    part: str | None = None
    lock: RunLock | None = field(default=None, repr=False)
    # Launches side by side save from their own threads: one dump of the state at a time.
    _saving: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def create(cls, plan: Plan, role: str) -> RunFolder:
        config = plan.config
        run_id = new_run_id(config.model)
        path = Path(config.output_dir) / run_id
        try:
            path.mkdir(parents=True, exist_ok=False)
        except OSError as exc:
            named = disk_error(exc, path)
            raise named if named is not exc else OSError(f"cannot create run folder {path}: {exc.strerror}") from exc
        lock = RunLock(path).acquire(role)  # a new folder: nobody else knows its name yet
        manifest = Manifest(
            run_id=run_id,
            created_at=now(),
            evalctl=evalctl_info(),
            host=host_info(),
            config=redact_config(config.model_dump(mode="json")),
            data_fingerprint=data_fingerprint(resolved_data_dir(config.task, config.data_dir)),
            metrics=plan.task.metric_names,
            plan=plan.record(),
        )
        folder = cls(path, run_id, manifest, lock=lock)
        folder.save()
        return folder

    @classmethod
    def take_up(cls, run: Run, part: str | None, role: str, wait_s: float) -> RunFolder:
        """Lock the run folder (BadInput if another writer holds it past `wait_s`), then read its state afresh."""
        lock = RunLock(run.path, part).acquire(role, wait_s)
        if part is None:
            return cls(run.path, run.run_id, read_manifest(run.path), None, lock)
        state = read_part_state(run.path, part)
        state.part, state.job_id, state.node = part, os.environ.get("SLURM_JOB_ID"), socket.gethostname()
        state.started_at, state.status = now(), "running"
        state.attempts += 1  # requeues and resubmissions of this part
        return cls(run.path, run.run_id, state, part, lock)

    def release(self) -> None:
        """Let the next writer in (the OS does it too when this process dies)."""
        if self.lock is not None:
            self.lock.release()

    def save(self) -> None:
        with self._saving:
            if self.part is None:
                assert isinstance(self.state, Manifest)
                write_manifest(self.path, self.state)
            else:
                write_part_state(self.path, self.part, self.state)

    def finish(self, status: str, failures: list[Failure]) -> None:
        self.state.status, self.state.finished_at, self.state.failures = status, now(), failures
        self.save()


@dataclass
class PreparedRun:
    """A run ready to send: its folder and plan, and (resumed) which requests the records settle."""

    folder: RunFolder
    plan: Plan
    finished: set[RequestKey]
    remaining: set[RequestKey] | None  # still to send; None: a new run sends all


def prepare(plan: Plan, resume: Run | None = None, part: str | None = None, *, role: str | None = None, wait_s: float = 0.0) -> PreparedRun:
    """Create the run folder of a built plan (or take up the interrupted one: what is left, the requests its records do
    not settle yet) and hold its lock; nothing is launched. `role` names the writer in the lock; `wait_s` is how long
    to wait for another writer."""
    if part is not None and resume is None:
        raise ValueError("a part runs in an existing run folder: give resume=")
    if resume is None:
        return PreparedRun(RunFolder.create(plan, role or "sweep"), plan, set(), None)
    folder = RunFolder.take_up(resume, part, role or "resume", wait_s)
    try:
        check_same_plan(resume.manifest.plan, plan.record())
        planned = planned_keys(plan)
        mine = {key.part for key in planned}
        # Records of the run's other parts (cluster jobs beside this one) are theirs to check and finish.
        finished = {key for key in finished_keys(resume) if key.part in mine}
        check_same_prompts(finished, planned)
        remaining = planned - finished
        if isinstance(folder.state, Manifest) and not folder.state.plan:  # a run begun before the manifest held its plan
            folder.state.plan = plan.record()
        folder.state.resumes.append(ResumeEntry(at=now(), finished_requests=len(finished), remaining_requests=len(remaining)))
        folder.state.status = "running"
        folder.save()
    except BaseException:
        folder.release()
        raise
    return PreparedRun(folder, plan, finished, remaining)


def resume_command(run_dir: Path) -> str:
    """The command that finishes an interrupted run."""
    return f"evalctl sweep --resume {shlex.quote(str(run_dir))}"


def interrupted_message(signal_name: str, run_dir: Path | None) -> str:
    """What a stop signal left: the records so far and how to finish."""
    if run_dir is None:
        return f"interrupted by {signal_name}; before the run folder was created"
    return f"interrupted by {signal_name}; records so far are kept in {run_dir}\nfinish with: {resume_command(run_dir)}"


def disk_message(exc: DiskError, run_dir: Path | None) -> str:
    """What a refused write means for the run: which file, what is kept, how to finish."""
    if run_dir is None:
        return f"{exc}; nothing was written"
    rows = sum(len(p.read_bytes().splitlines()) for p in record_files(run_dir))
    return (
        f"{exc} (errno {errno.errorcode.get(exc.errno, exc.errno)}). Every row written so far is safe: {rows} in {run_dir}; "
        f"servers are stopped. Free space (or fix the permission), then finish the run with:\n  {resume_command(run_dir)}"
    )
