"""A run's Slurm jobs (docs/clusters.md): their submission, what runs inside them, and the table of them.

One job per server profile x variant, then one aggregation job, submitted held and released only once the
manifest lists every job id, so it never reads a manifest the submitter is still writing. A part job runs one
profile x variant into the shared run folder (`Sweep(part=...)`); requeued or resubmitted, it resumes from the
records. The aggregation job, once all parts ended however they ended, folds each part's state file into the
manifest, compacts the records and finishes the run (outputs, gate). Parts hold the run's lock (`runlock`)
shared and their own part's exclusively; the aggregation job holds the run's exclusively. Both wait for it
(`LOCK_WAIT_S`) rather than refuse: the submitter holds it until every job is listed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import submitit

from evalctl.cluster.slurm import JobState, fitting_cpus, job_states, release, require_slurm, slurm_minutes
from evalctl.errors import RunFailed
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
from evalctl.plan import build
from evalctl.records import compact
from evalctl.runlock import RunLock
from evalctl.runs import Run
from evalctl.schema import ServerProfile, SlurmConfig, StoppingMode, SweepConfig, Variant
from evalctl.signals import Shutdown

if TYPE_CHECKING:
    from evalctl.execution.folder import PreparedRun

AGGREGATE = "aggregate"
LOCK_WAIT_S = 300.0
DEFAULT_CPUS = 8  # per profile x variant job unless the config says: a server and its client
SUBMITIT_DIR = "slurm"  # job scripts, pickled calls (may hold the config's secrets: owner-only), job logs


@dataclass(frozen=True)
class Submission:
    run_dir: Path
    run_id: str
    part_jobs: dict[str, str]  # part name -> job id
    aggregate_job: str


def part_config(config: SweepConfig, profile: ServerProfile, variant: Variant) -> SweepConfig:
    """One job's share: one profile x variant, on the GPUs Slurm gives the job. Sequentially, it stops its cells at
    one over the parts of alpha (`analysis.sequential`): every part plans the same cells, so the run keeps its family-wise rate."""
    alone = profile.model_copy(update={"engine": profile.engine.unpinned() if profile.engine else None})
    update: dict = {"servers": [alone], "run_variants": [variant.name], "gpus": None}
    if config.stopping.mode is StoppingMode.sequential:
        share = 1 / (len(config.servers) * len(config.active_variants()))
        update["stopping"] = config.stopping.model_copy(update={"regression_share": config.stopping.regression_share * share})
    return config.model_copy(update=update)


def _executor(folder: Path, slurm: SlurmConfig, name: str, time: str, cpus: int, gpus: int = 0, **sbatch: object) -> submitit.SlurmExecutor:
    executor = submitit.SlurmExecutor(folder=folder)
    params: dict = {
        "job_name": name,
        "time": slurm_minutes(time),
        "cpus_per_task": cpus,
        "partition": slurm.partition,
        "account": slurm.account,
        "qos": slurm.qos,
        "mem": f"{int(slurm.mem_gb * 1024)}M" if slurm.mem_gb else None,
        "gpus_per_node": gpus or None,  # CPU engines ask for none: a cluster without GPUs (gres) runs them too
        "additional_parameters": {**slurm.additional, **sbatch},
    }
    executor.update_parameters(**{k: v for k, v in params.items() if v is not None})
    return executor


def part_executor(folder: Path, config: SweepConfig, profile: ServerProfile, part: str, requeue: bool = True) -> submitit.SlurmExecutor:
    """The executor of one profile's job: the GPUs its engine needs (tp on GPU engines), requeued on preemption unless not."""
    slurm = config.slurm
    cpus = slurm.cpus_per_task or fitting_cpus(slurm.partition, DEFAULT_CPUS)
    return _executor(folder, slurm, f"evalctl-{part}", slurm.time, cpus, profile.gpus_needed(), **({"requeue": True} if requeue else {}))


def submit(config: SweepConfig, *, resume: Run | None = None, api_key: str | None = None, wait_for_lock_s: float = 0.0) -> Submission:
    """Create (or take up) the run folder and submit its jobs; returns at once with the job ids. The run's lock is held
    until the manifest lists every job (the parts wait for it)."""
    from evalctl.execution.folder import prepare
    from evalctl.execution.stopping import with_policy_settings

    require_slurm()
    # As a local sweep: the manifest records the stopping values the parts' jobs stop by (the
    # gate policy's unless `stopping:` sets them), so the gate can check its policy against them.
    config = with_policy_settings(config)
    run = prepare(build(config), resume, role="submit", wait_s=wait_for_lock_s)
    try:
        return _submit_jobs(config, run, api_key)
    finally:
        run.folder.release()


def _submit_jobs(config: SweepConfig, run: PreparedRun, api_key: str | None) -> Submission:
    folder = run.folder
    left = {key.part for key in run.remaining} if run.remaining is not None else None
    pairs = [
        p for p in dict.fromkeys((launch.profile.name, launch.variant.name) for launch in run.plan.launches) if left is None or p in left
    ]
    profiles, variants = {p.name: p for p in config.servers}, {v.name: v for v in config.variants}
    scripts = folder.path / SUBMITIT_DIR
    scripts.mkdir(mode=0o700, exist_ok=True)
    if api_key:
        os.environ["EVALCTL_API_KEY"] = api_key  # sbatch passes the environment on; never written to the run folder
    slurm = config.slurm
    submitted_at = now()
    jobs: list[submitit.Job] = []
    entries: list[JobEntry] = []
    try:
        for profile_name, variant_name in pairs:
            profile, variant = profiles[profile_name], variants[variant_name]
            part = f"{profile_name}-{variant_name}"
            executor = part_executor(scripts, config, profile, part)
            jobs.append(executor.submit(PartJob(), str(folder.path), part_config(config, profile, variant), part))
            entries.append(JobEntry(part=part, job_id=jobs[-1].job_id, submitted_at=submitted_at))
        after = {"dependency": "afterany:" + ":".join(j.job_id for j in jobs)} if jobs else {}
        executor = _executor(scripts, slurm, f"evalctl-{AGGREGATE}", slurm.aggregate_time, 1, hold=True, **after)
        jobs.append(executor.submit(aggregate, str(folder.path)))
        entries.append(JobEntry(part=AGGREGATE, job_id=jobs[-1].job_id, submitted_at=submitted_at))
    except Exception as exc:  # sbatch refused (partition, account, limits): leave nothing queued
        for job in jobs:
            job.cancel(check=False)
        folder.state.status, folder.state.error = "failed", f"submission failed: {exc}"
        folder.save()
        raise RunFailed(f"submission to Slurm failed: {exc}") from exc
    folder.state.executor, folder.state.status = "slurm", "submitted"
    folder.state.jobs.extend(entries)
    folder.save()
    release(entries[-1].job_id)
    return Submission(folder.path, folder.run_id, {e.part: e.job_id for e in entries[:-1]}, entries[-1].job_id)


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
