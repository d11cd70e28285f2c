"""`evalctl sweep --executor slurm` (submit, optionally wait for the gate) and `evalctl jobs`."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from evalctl.cli.common import console, err, fail
from evalctl.errors import ExitCode
from evalctl.schema import SweepConfig

if TYPE_CHECKING:
    from evalctl.runs import Run

SETTLE_S = 10.0  # the scheduler gives a fresh job its pending reason within seconds


def sweep_on_slurm(config: SweepConfig, resume: Run | None, api_key: str | None, wait: bool, wait_for_lock_s: float) -> None:
    from evalctl.analysis.gate_document import GATE_FILE, GateFileError, read_gate
    from evalctl.cluster.slurm import NeverStarts, cancel, check_startable, wait_until_ended
    from evalctl.cluster.submit import SUBMITIT_DIR, submit

    sub = submit(config, resume=resume, api_key=api_key, wait_for_lock_s=wait_for_lock_s)
    console.print(f"run id: {sub.run_id}")
    for part, job_id in sub.part_jobs.items():
        console.print(f"job {job_id}: {part}")
    console.print(f"job {sub.aggregate_job}: aggregate (analysis, gate) after the others end")
    console.print(f"run folder: {sub.run_dir}", soft_wrap=True)  # whole on one line: scripts read it
    parts, partition = list(sub.part_jobs.values()), config.slurm.partition
    try:
        check_startable(parts, partition, settle_s=SETTLE_S)
        if not wait:
            return
        with console.status(f"waiting for aggregation job {sub.aggregate_job} (evalctl jobs {sub.run_dir})"):
            state = wait_until_ended(sub.aggregate_job, watch=parts, partition=partition)
    except NeverStarts as exc:
        cancel([*parts, sub.aggregate_job])
        raise fail(f"{exc}\nthe run's jobs were cancelled; resubmit with --resume {sub.run_dir}") from None
    except KeyboardInterrupt:
        err.print(f"stopped waiting; the jobs keep running (evalctl jobs {sub.run_dir})")
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    try:
        gate = read_gate(sub.run_dir)
    except GateFileError:
        gate = None
    if gate is None:
        log = sub.run_dir / SUBMITIT_DIR / f"{sub.aggregate_job}_0_log.err"
        message = f"aggregation job {sub.aggregate_job} ended ({state.state}) without a readable {GATE_FILE}; see {log}"
        raise fail(message, ExitCode.RUN_FAILED) from None
    console.print(f"verdict: {gate.verdict} (exit {gate.exit_code}); gate files in {sub.run_dir}", soft_wrap=True)
    raise typer.Exit(gate.exit_code)


def jobs(
    run: Annotated[Path | None, typer.Argument(help="A run folder; default: the newest one submitted to Slurm under --output.")] = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="Results root to look in when no run folder is given.")] = Path("results"),
) -> None:
    """Show the Slurm jobs of a run: Slurm's state (squeue, scontrol, sacct) and each part's own state in the run folder.

    Exit status (table: evalctl --help): PASS when shown; BAD_INPUT for not a run folder, or a run not submitted to Slurm.
    """
    from evalctl.extras import require

    require("submitit", "evalctl jobs")
    from evalctl.cluster.submit import job_rows, latest_submitted
    from evalctl.manifest import read_manifest
    from evalctl.report.terminal import jobs_table

    run_dir = run or latest_submitted(output)
    if run_dir is None:
        raise fail(f"no run submitted to Slurm under {output}; give a run folder")
    manifest = read_manifest(run_dir)
    if not manifest.jobs:
        raise fail(f"{run_dir} was not submitted to Slurm (its manifest lists no jobs)")
    live = shutil.which("squeue") is not None
    title = f"Jobs of {manifest.run_id}" + ("" if live else " (no squeue here: states as last recorded)")
    console.print(jobs_table(job_rows(run_dir, manifest, live=live), title))
    gate = manifest.gate
    console.print(f"run status: {manifest.status}" + (f"; gate: {gate.verdict}" if gate else ""))
