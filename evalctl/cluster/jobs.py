"""What runs inside the Slurm jobs of a run, and the table of those jobs.

A part job runs one profile x variant into the shared run folder (`Sweep(part=...)`); requeued or resubmitted,
it resumes from the records. The aggregation job, once all parts ended however they ended, folds each part's state
file into the manifest, compacts the records and finishes the run (outputs, gate). Parts hold the run's lock
(`runlock`) shared and their own part's exclusively; the aggregation job holds the run's exclusively. Both wait for
it (`LOCK_WAIT_S`) rather than refuse: the submitter holds it until every job is listed.
"""

from __future__ import annotations

import os
from pathlib import Path

import submitit

from evalctl.cluster.slurm import JobState, job_states
from evalctl.manifest import (
    GateSummary,
    JobEntry,
    Manifest,
    ManifestError,
    now,
    part_states,
    read_manifest,
    read_part_state,
    write_manifest,
)
from evalctl.records import compact
from evalctl.runlock import RunLock
from evalctl.schema import SweepConfig
from evalctl.signals import Shutdown

AGGREGATE = "aggregate"
LOCK_WAIT_S = 300.0


class PartJob(submitit.helpers.Checkpointable):
    """One profile x variant of a run, in a Slurm job; Checkpointable: preempted or timed out, it requeues itself."""

    def __call__(self, run_dir: str, config: SweepConfig, part: str) -> str:
        from evalctl.execution import Sweep
        from evalctl.runs import open_run

        folder = Path(run_dir)
        shutdown = Shutdown()  # scancel / preemption send SIGTERM: stop servers, keep records
        api_key = os.environ.get("EVALCTL_API_KEY") or os.environ.get("OPENAI_API_KEY")
        sweep = Sweep(config, api_key=api_key, shutdown=shutdown, resume=open_run(folder), part=part, wait_for_lock_s=LOCK_WAIT_S)
        with shutdown.install(), sweep:
            result = sweep.run()
        return "failed" if result.failures else "complete"


def latest_submitted(root: Path) -> Path | None:
    """The newest run folder under `root` that was submitted to Slurm (its manifest lists jobs)."""
    for run in sorted((p.parent for p in root.glob("*/manifest.json")), key=lambda p: p.stat().st_mtime, reverse=True):
        try:
            if read_manifest(run).jobs:
                return run
        except ManifestError:
            continue
    return None


def job_rows(run_dir: Path, manifest: Manifest, live: bool = True) -> list[JobEntry]:
    """One row per job the run submitted: Slurm's state (live: asked now) and the part's own state file."""
    states: dict[str, JobState] = job_states(e.job_id for e in manifest.jobs) if live and manifest.jobs else {}
    rows = []
    for entry in manifest.jobs:
        part_state = read_part_state(run_dir, entry.part) if entry.part != AGGREGATE else None
        mine = part_state is not None and part_state.job_id == entry.job_id  # a later resubmission of the part owns the file now
        slurm = states.get(entry.job_id)
        rows.append(
            entry.model_copy(
                update={
                    "slurm_state": slurm.state if slurm else entry.slurm_state,
                    "node": (part_state.node if mine else None) or (slurm.node if slurm else entry.node),
                    "reason": slurm.reason if slurm else entry.reason,
                    "run_state": part_state.status if mine else entry.run_state,
                }
            )
        )
    return rows


def fold_jobs(run_dir: Path, manifest: Manifest) -> None:
    """Bring the parts' states into the manifest: job states, servers, failures, and the run's status."""
    manifest.jobs = job_rows(run_dir, manifest)
    parts = part_states(run_dir)
    submitted = {e.part for e in manifest.jobs} - {AGGREGATE}
    manifest.servers = [server for state in parts.values() for server in state.servers]
    manifest.failures = [failure for state in parts.values() for failure in state.failures]
    manifest.decisions = [decision for state in parts.values() for decision in state.decisions]  # each part stopped its own cells
    manifest.parts = statuses = {part: parts[part].status if part in parts else "not started" for part in submitted}
    complete = all(s == "complete" for s in statuses.values())
    manifest.status = "complete" if complete else "failed" if "failed" in statuses.values() else "incomplete"
    manifest.finished_at = now()


def aggregate(run_dir: str) -> int:
    """The aggregation job: fold job states into the manifest, compact, finish the run; the gate's exit code."""
    from evalctl.report.finish import finish_run
    from evalctl.runs import load_run

    folder = Path(run_dir)
    lock = RunLock(folder).acquire(AGGREGATE, LOCK_WAIT_S)
    try:
        manifest = read_manifest(folder)
        fold_jobs(folder, manifest)
        write_manifest(folder, manifest)
        compact(folder)
        result = finish_run(load_run(folder))
        manifest.gate = GateSummary(verdict=result.verdict, exit_code=result.exit_code)
        for entry in manifest.jobs:
            if entry.job_id == os.environ.get("SLURM_JOB_ID"):
                entry.run_state = "complete"
        write_manifest(folder, manifest)
        return result.exit_code
    finally:
        lock.release()
