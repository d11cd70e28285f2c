"""The run folder a sweep writes: created new, or an interrupted one taken up; its state saved as it goes.

A part (`part=`) is one slice of a run folder that other slices share at the same time (a
cluster job, given a config of one profile x variant): it keeps its state in its own file
(`manifest.write_part_state`), never touching the run's manifest.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evalctl.config import SweepConfig
from evalctl.manifest import (
    Failure,
    Manifest,
    ResumeEntry,
    RunState,
    evalctl_info,
    host_info,
    new_run_id,
    now,
    read_part_state,
    write_manifest,
    write_part_state,
)
from evalctl.plan import ServerLaunch, expand
from evalctl.resume import RequestKey, check_same_prompts, data_fingerprint, finished_keys, planned_keys
from evalctl.runs import Run
from evalctl.secrets import redact_config
from evalctl.tasks.lmeval import LmEvalTask, task_of


@dataclass
class RunFolder:
    """One writer's view of a run folder: the run's manifest, or (`part`) that part's state."""

    path: Path
    run_id: str
    state: RunState
    part: str | None = None

    @classmethod
    def create(cls, config: SweepConfig, metrics: list[str]) -> RunFolder:
        run_id = new_run_id(config.model)
        path = Path(config.output_dir) / run_id
        try:
            path.mkdir(parents=True, exist_ok=False)
        except OSError as exc:
            raise OSError(f"cannot create run folder {path}: {exc.strerror}") from exc
        manifest = Manifest(
            run_id=run_id,
            created_at=now(),
            evalctl=evalctl_info(),
            host=host_info(),
            config=redact_config(config.model_dump(mode="json")),
            data_fingerprint=data_fingerprint(config.resolved_data_dir()),
            metrics=metrics,
        )
        folder = cls(path, run_id, manifest)
        folder.save()
        return folder

    @classmethod
    def take_up(cls, run: Run, part: str | None = None) -> RunFolder:
        state = run.manifest if part is None else read_part_state(run.path, part)
        return cls(run.path, run.run_id, state, part)

    def save(self) -> None:
        if self.part is None:
            assert isinstance(self.state, Manifest)
            write_manifest(self.path, self.state)
        else:
            write_part_state(self.path, self.part, self.state)

    def note_resume(self, finished: int, remaining: int) -> None:
        self.state.resumes.append(ResumeEntry(at=now(), finished_requests=finished, remaining_requests=remaining))
        self.state.status = "running"
        self.save()

    def finish(self, status: str, failures: list[Failure]) -> None:
        self.state.status, self.state.finished_at, self.state.failures = status, now(), failures
        self.save()


@dataclass
class PreparedRun:
    """A run ready to send: its folder, task and launches, and (resumed) which requests the records settle."""

    folder: RunFolder
    task: LmEvalTask
    launches: list[ServerLaunch]
    finished: set[RequestKey]
    remaining: set[RequestKey] | None  # still to send; None: a new run sends all


def prepare(config: SweepConfig, resume: Run | None = None, part: str | None = None) -> PreparedRun:
    """Check task and data, then create the run folder (or take up the interrupted one); nothing is launched."""
    if part is not None and resume is None:
        raise ValueError("a part runs in an existing run folder: give resume=")
    task = task_of(config)
    launches = expand(config)
    if resume is None:
        return PreparedRun(RunFolder.create(config, task.metric_names), task, launches, set(), None)
    folder = RunFolder.take_up(resume, part)
    planned = planned_keys([cell for launch in launches for cell in launch.cells], task, config.limit)
    mine = {key.part for key in planned}
    # Records of the run's other parts (cluster jobs beside this one) are theirs to check and finish.
    finished = {key for key in finished_keys(folder.path) if key.part in mine}
    check_same_prompts(finished, planned)
    remaining = planned - finished
    folder.note_resume(len(finished), len(remaining))
    return PreparedRun(folder, task, launches, finished, remaining)
