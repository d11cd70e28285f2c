"""Submit a sweep to Slurm: one job per server profile x variant, then one aggregation job (docs/clusters.md).

The aggregation job is submitted held and released only once the manifest lists every job id,
so it never reads a manifest the submitter is still writing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import submitit

from evalctl.cluster.jobs import AGGREGATE, PartJob, aggregate
from evalctl.cluster.slurm import fitting_cpus, release, require_slurm, slurm_minutes
from evalctl.errors import RunFailed
from evalctl.manifest import JobEntry, now
from evalctl.plan import build
from evalctl.runs import Run
from evalctl.schema import ServerProfile, SlurmConfig, StoppingMode, SweepConfig, Variant

if TYPE_CHECKING:
    from evalctl.execution.folder import PreparedRun

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
    until the manifest lists every job (`cluster.jobs`: the parts wait for it)."""
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
    pairs = list(dict.fromkeys((launch.profile.name, launch.variant.name) for launch in run.plan.launches))
    profiles = {p.name: p for p in config.servers}
    variants = {v.name: v for v in config.variants}
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
            if left is not None and (profile_name, variant_name) not in left:
                continue
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
