"""Run a plan: one server per launch, its cells against it, records as they complete; as many launches at once as
`side_by_side` holds."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from evalctl import venvs
from evalctl.cell import CellKey
from evalctl.errors import DiskError
from evalctl.execution.cells import CellRunner
from evalctl.execution.folder import PreparedRun, RunFolder, prepare
from evalctl.execution.launch import Launch
from evalctl.execution.progress import SweepProgress
from evalctl.execution.stopping import Stopper, sequential_baseline, with_policy_settings
from evalctl.manifest import Failure
from evalctl.plan import ServerLaunch, build, noise_cells
from evalctl.probe.session import sweep_probe
from evalctl.records import RecordWriter, compact, noise_file, record_files
from evalctl.runs import Run
from evalctl.schema import CacheMode, SweepConfig
from evalctl.servers.gpus import gpu_assignment
from evalctl.servers.process import ServerError
from evalctl.servers.registry import adapter_for
from evalctl.signals import Shutdown

__all__ = ["Sweep", "SweepProgress", "SweepResult"]


@dataclass
class SweepResult:
    run_dir: Path
    failures: list[Failure] = field(default_factory=list)


class Sweep:
    """One run: a new run folder, or (`resume=`) the rest of an interrupted one; `part=` one slice of a run folder
    (`execution.folder`), appending to its own records file and leaving compaction to whoever aggregates the parts.

    The run folder's writer lock is taken in `run` and held until `close` (or the end of a `with` block), so what
    the caller writes after the sweep (gate files, report) is written by the same one writer.
    """

    def __init__(
        self,
        config: SweepConfig,
        *,
        progress: SweepProgress | None = None,
        api_key: str | None = None,
        shutdown: Shutdown | None = None,
        resume: Run | None = None,
        part: str | None = None,
        wait_for_lock_s: float = 0.0,
    ):
        self.config = with_policy_settings(config)  # the manifest records the values its cells are stopped by
        self.progress = progress or SweepProgress()
        self.api_key = api_key
        self.shutdown = shutdown or Shutdown()
        self.resume = resume
        self.part = part
        self.wait_for_lock_s = wait_for_lock_s
        self.prepared: PreparedRun | None = None

    def __enter__(self) -> Sweep:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.prepared is not None:
            self.prepared.folder.release()

    @property
    def run_dir(self) -> Path | None:
        return self.prepared.folder.path if self.prepared else None

    def run(self) -> SweepResult:
        # GPUs, task, data and prompts first: bad input fails before anything is written or launched.
        gpus = gpu_assignment(self.config.servers, self.config.gpus)
        plan = build(self.config)
        baseline = sequential_baseline(self.config, plan.cells)
        for variant in self.config.active_variants():
            if variant.pip:  # a build named by version: its venv, made once and cached (a spec pip cannot install: bad input)
                venvs.ensure(variant.pip, note=self.progress.warn)
        for profile in (p for p in self.config.servers if p.engine and not p.url):
            for variant in self.config.active_variants():
                adapter_for(profile.engine.name).preflight(profile, variant)
        role = f"part {self.part}" if self.part else None
        self.prepared = run = prepare(plan, self.resume, self.part, role=role, wait_s=self.wait_for_lock_s)
        folder = run.folder
        result = SweepResult(folder.path)
        status = "interrupted"
        disk_refused = False
        try:
            with RecordWriter(folder.path, self.part) as writer:
                stopper = self._stopper(baseline, run)  # after the writer: a part's records file exists to be read
                cells = CellRunner(
                    plan, folder.run_id, writer,
                    finished=run.finished, progress=self.progress, shutdown=self.shutdown, api_key=self.api_key,
                    stopper=stopper,
                )  # fmt: skip
                if stopper is not None:  # resumed: a cell with every answer recorded but no decision is judged on them
                    for cell in (key for key, c in plan.cells.items() if c.prompts and not cells.unfinished(key)):
                        stopper.check_recorded(cell)

                def one(launch: ServerLaunch) -> list[Failure]:
                    return self._run_launch(launch, cells, folder, tuple(gpus.get(launch.profile.name, ())))

                at_once = side_by_side(self.config, plan.launches, bool(gpus))
                if at_once == 1:  # in this thread: a signal raises where the launch stands
                    for launch in plan.launches:
                        result.failures.extend(one(launch))
                else:
                    pool = ThreadPoolExecutor(at_once, "launch")
                    try:
                        for failures in [pool.submit(one, launch) for launch in plan.launches]:
                            result.failures.extend(failures.result())
                    finally:  # one raised (a signal, a full disk): none queued starts, those running stop at their next check
                        pool.shutdown(cancel_futures=True)
            status = "failed" if result.failures else "complete"
        except DiskError:
            disk_refused = True
            raise
        finally:
            try:
                folder.finish(status, result.failures)
                if self.part is None and record_files(folder.path):
                    compact(folder.path)
            except DiskError:
                if not disk_refused:
                    raise
                # Still full: the first refusal is the one to report; the records hold every row, --resume compacts.
        return result

    def _stopper(self, baseline: Run | None, run: PreparedRun) -> Stopper | None:
        if baseline is None:
            return None
        recorded = self.resume.samples if self.resume is not None else None
        cells, folder = list(run.plan.cells.values()), run.folder
        return Stopper(self.config.stopping, baseline.samples, cells, decisions=folder.state.decisions, save=folder.save, recorded=recorded)

    def _run_launch(self, plan: ServerLaunch, cells: CellRunner, folder: RunFolder, devices: tuple[str, ...]) -> list[Failure]:
        """Run a launch's unfinished cells on one server; the failures (at most one) to report."""
        self.shutdown.check()  # a launch side by side, queued when the signal came: not started
        todo = [cell for cell in plan.cells if cells.unfinished(cell)]
        # The A/A arm's replica is renamed into place when whole: a run killed before or in the arm still owes it.
        arm_file = folder.path / noise_file(plan.profile.name, plan.variant.name)
        noise = () if arm_file.is_file() else noise_cells(self.config, plan)
        if not todo and not noise:
            return []
        launch = Launch(plan, folder, devices, self.config, self.progress, self.shutdown, self.api_key)
        folder.state.servers.append(launch.entry)
        cell = None
        try:
            launch.start()
            if self.config.probe and plan.cache is CacheMode.on:
                launch.entry.probe = sweep_probe(
                    launch.server, cells.task, self.config, folder.path, api_key=self.api_key, warn=self.progress.warn
                )
                folder.save()
            if not launch.server.launched and plan.cache is CacheMode.off and not launch.server.adapter.cold_per_request():
                self.progress.warn(
                    f"{plan.label}: server at a URL - cache mode is a label only; cached_tokens in the records show what the server did"
                )
            for cell in todo:
                while not launch.alive or not cells.run(cell, launch.server, launch.entry.cells):
                    launch.restart(cell)
            if noise:
                self._run_noise_arm(noise, arm_file, launch, cells)
            launch.entry.status = "ok"
            return []
        except ServerError as exc:
            if cell is not None:
                cells.record_server_died(cell, exc)
            launch.failed(exc)
            left = todo[todo.index(cell) :] if cell else todo
            failed = [c.label for c in left]
            return [Failure(server=plan.label, error=exc.args[0], exit_code=exc.exit_code, log_tail=exc.log_tail, failed_cells=failed)]
        finally:
            if self.shutdown.requested:
                # Say so before the slow part (stopping the server): a cluster job may be killed
                # a few seconds after its SIGTERM (Slurm's KillWait).
                folder.state.status = "interrupted"
                folder.save()
            launch.stop(interrupted=self.shutdown.requested)

    def _run_noise_arm(self, owed: tuple[CellKey, ...], done: Path, launch: Launch, cells: CellRunner) -> None:
        """The A/A arm: the reference cells once more, cold, on this server, into `done`; a failure costs the arm, not
        the run. A run killed mid-arm leaves only the partial file: --resume runs the arm again from its start (it
        must be one cold pass)."""
        partial = done.with_name(done.name + ".partial")
        partial.unlink(missing_ok=True)
        try:
            with RecordWriter(done.parent, file=partial.name) as replica:
                for cell in owed:
                    while not launch.alive or not cells.run(cell, launch.server, launch.entry.noise_cells, replica=replica):
                        launch.restart(cell)
            partial.replace(done)
        except ServerError as exc:
            launch.entry.noise_error = exc.args[0]
            self.progress.warn(f"{launch.label}: A/A arm failed: {exc.args[0]}")


def side_by_side(config: SweepConfig, launches: tuple[ServerLaunch, ...], gpus: bool) -> int:
    """How many launches run at once: the config's `side_by_side`; for 0, as many as this machine's cores hold where
    every launch is a CPU server that names its cores (`EngineAdapter.cores`), else 1. Never above the launches, and
    1 whatever the config says with GPUs (a profile's launches share its devices) or a server at a URL (its cache-on
    and cache-off launches are one server: a cell's flush would empty the other's cache)."""
    if gpus or len(launches) < 2 or any(lc.profile.url for lc in launches):
        return 1
    if config.side_by_side:
        return min(config.side_by_side, len(launches))
    cores = [None if p.engine is None else adapter_for(p.engine.name).cores(p) for p in (lc.profile for lc in launches)]
    if None in cores:
        return 1
    # the cores this process may use (Linux; elsewhere all of them)
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(len(launches), usable // max(cores)))
