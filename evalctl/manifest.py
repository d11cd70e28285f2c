"""`manifest.json`: what a run was (config, servers, versions, host), typed and written atomically.

A run split into parts that run at once (cluster jobs) keeps each part's state in `jobs/<part>.json`, written only
by that part; the aggregation step folds them into the manifest. Every model keeps fields it does not know (a newer
evalctl's); one that fails validation is a `ManifestError`.
"""

from __future__ import annotations

import datetime as dt
import getpass
import json
import os
import platform
import socket
import subprocess
import uuid
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_serializer

import evalctl
from evalctl.cell import CellKey
from evalctl.errors import ManifestError
from evalctl.fsio import write_atomic
from evalctl.schema import CacheMode
from evalctl.venvs import PipVenv

MANIFEST_FILE = "manifest.json"
PARTS_DIR = "jobs"

RunStatus = Literal["running", "complete", "failed", "interrupted", "submitted", "incomplete"]
# A run in these states is still being written (locally, or by its cluster jobs): no samples.parquet yet is normal.
STILL_WRITING: tuple[RunStatus, ...] = ("running", "submitted")


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat()


class _Entry(BaseModel):
    model_config = ConfigDict(extra="allow")


# The metrics key (servers' `metrics` maps) of the counter of prompt tokens served from the prefix
# cache: every engine that has one records it under this name, and the cache-engaged check reads it.
CACHED_TOKENS = "cached_tokens"


class CellEntry(_Entry):
    """One cell as its server ran it: cache state going in, the engine's counters around it."""

    shots: int
    concurrency: int
    pass_index: int
    flushed: bool = False
    prewarmed: bool = False
    shared_prefix_chars: int | None = None  # what a prefix cache can hold for the cell (the cache-engaged check)
    shared_prefix_tokens: int | None = None  # the same, by the server's tokenizer (None: it has none)
    metrics_before: dict[str, Any] = Field(default_factory=dict)
    metrics_after: dict[str, Any] = Field(default_factory=dict)
    host_other_cpu: float | None = None  # share of the machine's CPUs other work used meanwhile (execution.host_load)


class _Cell(_Entry):
    """An entry about one cell: the six that name it (`CellKey`)."""

    profile: str
    variant: str
    cache: str
    shots: int
    concurrency: int
    pass_index: int

    @property
    def cell(self) -> CellKey:
        return CellKey.from_record(self)


class PlannedCell(_Cell):
    """One cell of the run's plan (`plan.Plan.record`): the questions it asks, and a digest of which."""

    questions: int
    prompts: str  # sha256 of its doc ids and prompt hashes, in order: the same digest, the same requests


class CellDecision(_Cell):
    """A cell's sequential verdict against the baseline run, at the look it was decided. A cell decided before its
    last look sent nothing more: its unsent requests are saved, not missing. Undecided at its last look: inconclusive."""

    verdict: Literal["regression", "pass", "inconclusive"]
    look: int  # 1-based
    answered: int  # questions sent (and answered) up to that look
    planned: int
    by_e_process: bool = False
    # The paired counts the decision rests on (None in runs from before they were kept).
    b: int | None = None
    c: int | None = None
    n: int | None = None
    drift: bool = False  # the drop changed along the send order (`sequential.drift_flags`): no early pass

    @property
    def saved(self) -> int:
        return self.planned - self.answered


class RestartEntry(_Entry):
    at: str
    cell: str
    exit_code: int | None = None


class ServerEntry(_Entry):
    """One server launch (profile x variant x cache) and what became of it."""

    profile: str
    variant: str
    cache: str
    engine: str | None = None  # at a URL: the engine named or detected (None: none known)
    gpu: str | None = None
    devices: list[str] = Field(default_factory=list)
    variant_git_revision: str | None = None
    deterministic: bool | None = None
    argv: list[str] | None = None  # redacted
    env: dict[str, str] = Field(default_factory=dict)  # redacted
    url: str | None = None
    canary: str | None = None  # the fault evalctl's proxy injected in front of this server (`sweep --canary`)
    canary_url: str | None = None
    log: str | None = None
    info: dict[str, Any] = Field(default_factory=dict)
    engine_version: str | None = None
    unset_settings: dict[str, str] = Field(default_factory=dict)  # requested settings the build lacks -> why (a launcher's record)
    venv: PipVenv | None = None  # a build named by version (variant `pip`): its requirements, resolved versions, venv
    probe: dict[str, Any] | None = None
    restarts: int = 0
    restart_log: list[RestartEntry] = Field(default_factory=list)
    cells: list[CellEntry] = Field(default_factory=list)
    noise_cells: list[CellEntry] = Field(default_factory=list)  # the A/A arm's cell (the reference cell once more)
    noise_error: str | None = None  # why the A/A arm failed; the run went on
    status: Literal["ok", "failed"] | None = None
    error: str | None = None
    exit_code: int | None = None
    log_tail: str | None = None

    @property
    def label(self) -> str:
        return f"{self.profile}/{self.variant} cache {self.cache}"

    def cell_of(self, entry: CellEntry) -> CellKey:
        """The cell one of its `cells` logs (an entry holds only shots, concurrency and pass: the rest is the server's)."""
        return CellKey(self.profile, self.variant, CacheMode(self.cache), entry.shots, entry.concurrency, entry.pass_index)


class Failure(_Entry):
    """A server that failed for good, and the cells it left unrun."""

    server: str
    error: str
    exit_code: int | None = None
    log_tail: str = ""
    failed_cells: list[str] = Field(default_factory=list)


class ResumeEntry(_Entry):
    at: str
    finished_requests: int
    remaining_requests: int


class RunState(_Entry):
    """What one writer of a run folder records as it runs: the run's manifest or a part's state."""

    status: str = "running"
    servers: list[ServerEntry] = Field(default_factory=list)
    failures: list[Failure] = Field(default_factory=list)
    resumes: list[ResumeEntry] = Field(default_factory=list)
    decisions: list[CellDecision] = Field(default_factory=list)  # sequential stopping, per cell
    finished_at: str | None = None


class PartState(RunState):
    """`jobs/<part>.json`: one cluster job's share of a run (empty before the part first ran)."""

    status: Literal["running", "complete", "failed", "interrupted", "not started"] = "not started"
    part: str | None = None
    job_id: str | None = None
    node: str | None = None
    started_at: str | None = None
    attempts: int = 0


class JobEntry(_Entry):
    """A Slurm job of the run, with its state as last recorded."""

    part: str
    job_id: str
    submitted_at: str | None = None
    slurm_state: str | None = None
    node: str | None = None
    reason: str | None = None
    run_state: str | None = None


class GateSummary(_Entry):
    verdict: str
    exit_code: int


class Host(_Entry):
    """The machine and account a run ran as (older manifests lack `user`)."""

    hostname: str | None = None
    user: str | None = None
    platform: str | None = None
    python: str | None = None
    cpus: int | None = None


class EvalctlInfo(_Entry):
    version: str | None = None
    git_revision: str | None = None


class Manifest(RunState):
    run_id: str
    status: RunStatus = "running"
    created_at: str | None = None
    evalctl: EvalctlInfo = Field(default_factory=EvalctlInfo)
    host: Host = Field(default_factory=Host)
    config: dict[str, Any] = Field(default_factory=dict)  # redacted (`secrets.redact_config`)
    data_fingerprint: str | None = None
    # The task's metrics as the records name them, the primary first (default: GSM8K's, of older manifests).
    metrics: list[str] = Field(default_factory=lambda: ["strict", "flexible"])
    # Every cell of the plan as built (cells need not ask as many questions: prefix-recall at k records asks at most k).
    plan: list[PlannedCell] = Field(default_factory=list)
    executor: Literal["local", "slurm"] = "local"
    error: str | None = None
    jobs: list[JobEntry] = Field(default_factory=list)
    parts: dict[str, str] = Field(default_factory=dict)
    gate: GateSummary | None = None

    @field_serializer("host", "evalctl")
    def _as_recorded(self, value: BaseModel) -> dict[str, Any]:
        # Only what was recorded: an older manifest's host rewritten stays as it was.
        return value.model_dump(exclude_unset=True)

    @property
    def model(self) -> str | None:
        return self.config.get("model")

    @property
    def gate_policy(self) -> str | None:
        """The gate policy the run's config names (a policy name, see `config_files`, or a file); None: the built-in."""
        return self.config.get("gate_policy")


def new_run_id(model: str) -> str:
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{model}-{uuid.uuid4().hex[:6]}"


def git_revision(path: Path) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _user() -> str | None:
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name and no passwd entry (some containers)
        return None


def host_info() -> Host:
    return Host(
        hostname=socket.gethostname(), user=_user(), platform=platform.platform(), python=platform.python_version(), cpus=os.cpu_count()
    )


def evalctl_info() -> EvalctlInfo:
    return EvalctlInfo(version=evalctl.__version__, git_revision=git_revision(Path(evalctl.__file__).parent))


def write_manifest(run_dir: Path, manifest: Manifest) -> None:
    write_atomic(run_dir / MANIFEST_FILE, manifest.model_dump_json(indent=2))


def part_state_path(run_dir: Path, part: str) -> Path:
    return run_dir / PARTS_DIR / f"{part}.json"


def write_part_state(run_dir: Path, part: str, state: PartState) -> None:
    (run_dir / PARTS_DIR).mkdir(exist_ok=True)
    write_atomic(part_state_path(run_dir, part), state.model_dump_json(indent=2))


def read_part_state(run_dir: Path, part: str) -> PartState:
    """A part's state; empty before the part first ran (or when its file is unreadable: the part rewrites it)."""
    try:
        return PartState.model_validate_json(part_state_path(run_dir, part).read_text())
    except (OSError, ValidationError):
        return PartState(part=part)


def part_states(run_dir: Path) -> dict[str, PartState]:
    return {p.stem: read_part_state(run_dir, p.stem) for p in sorted((run_dir / PARTS_DIR).glob("*.json"))}


def read_manifest(run_dir: Path) -> Manifest:
    """The run's manifest; ManifestError naming what is wrong."""
    path = run_dir / MANIFEST_FILE
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, NotADirectoryError):
        raise ManifestError(f"{run_dir} has no {MANIFEST_FILE}: not a run folder") from None
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{path} is corrupt: {exc}") from None
    # Any other OSError is the disk's, not the user's: it propagates (exit 5).
    if not isinstance(data, dict):
        raise ManifestError(f"{path} is corrupt: not a JSON object")
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(map(str, first["loc"])) or "(top level)"
        raise ManifestError(
            f"{path} is not an evalctl manifest this version can read: {field}: {first['msg']} ({exc.error_count()} error(s))"
        ) from None
