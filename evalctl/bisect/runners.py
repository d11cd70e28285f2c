"""Where a step's run happens: here (`local`), or as one Slurm job at a time (`slurm`: the next build depends on this verdict).

Both run an ordinary sweep into the step's results root, or take up the run folder an
interrupted bisect left there (only its unanswered requests are sent).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from evalctl.bisect.steps import StepRunner, run_folder
from evalctl.execution import Sweep, SweepProgress
from evalctl.manifest import Failure
from evalctl.schema import SweepConfig
from evalctl.signals import Shutdown


def sweep_step(
    config: SweepConfig, root: Path, progress: SweepProgress | None = None, shutdown: Shutdown | None = None
) -> tuple[Path, list[Failure]]:
    """Run the step's sweep (or finish the one under `root`); its run folder and failures."""
    from evalctl.resume import resume_config
    from evalctl.runs import open_run

    existing, resumed = run_folder(root), None
    if existing is not None:
        run = open_run(existing)
        if run.manifest.status in ("complete", "failed"):
            return existing, list(run.manifest.failures)
        config, resumed = resume_config(existing, config, {})
    with Sweep(config, progress=progress, shutdown=shutdown, resume=resumed) as sweep:  # the writer lock released after
        result = sweep.run()
    return result.run_dir, result.failures


def local_runner(progress: Callable[[], SweepProgress], shutdown: Shutdown) -> StepRunner:
    def run(config: SweepConfig, root: Path) -> tuple[Path, list[Failure]]:
        with progress() as bar:
            return sweep_step(config, root, bar, shutdown)

    return run


def slurm_runner(scripts: Path) -> StepRunner:
    """Each step one job (the profile's GPUs, the config's Slurm settings); waits for it, as the next build depends on it."""
    from evalctl.cluster.slurm import fitting_cpus
    from evalctl.cluster.submit import DEFAULT_CPUS, _executor

    def run(config: SweepConfig, root: Path) -> tuple[Path, list[Failure]]:
        profile = config.servers[0]
        slurm = config.slurm
        cpus = slurm.cpus_per_task or fitting_cpus(slurm.partition, DEFAULT_CPUS)
        gpus = profile.gpus_needed()
        scripts.mkdir(mode=0o700, parents=True, exist_ok=True)
        job = _executor(scripts, slurm, f"evalctl-bisect-{root.name}", slurm.time, cpus, gpus).submit(sweep_step, config, root)
        return job.result()

    return run
