"""`evalctl sweep`: resolve the config, run the plan, print the run's tables."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from evalctl.cli.common import console, err, fail
from evalctl.cli.options import ApiKey, ConfigFile, Engine, Executor, Model, Overrides, Url, config_options, resolve_config
from evalctl.errors import DiskError, ExitCode
from evalctl.schema import SweepConfig

if TYPE_CHECKING:
    from evalctl.execution import SweepResult
    from evalctl.runs import Run


@config_options()
def sweep(
    model: Model = None,
    config: ConfigFile = None,
    overrides: Overrides | None = None,
    url: Url = None,
    engine: Engine = None,
    resume: Annotated[
        Path | None,
        typer.Option(
            help="Finish an interrupted run in this run folder: same run id, only unfinished requests sent. "
            "Its recorded config is used; a --config/--model or option that changes what the records mean is refused."
        ),
    ] = None,
    follow: Annotated[
        Path | None,
        typer.Option(
            metavar="RUN",
            help="Follow up a finished hunt now (a hunt run locally does so when it ends, unless hunt.follow_up is false): "
            "copies of the conversations of the returns it found beyond the healthy spread (the worst two a build), the same "
            "shapes with other questions, on the builds that have one, written into RUN/follow-up/ (an interrupted one is "
            "finished); `evalctl gate RUN` then judges both (docs/conversations.md). RUN's recorded config; --set applies.",
        ),
    ] = None,
    api_key: ApiKey = None,
    executor: Annotated[
        Executor,
        typer.Option(
            help="local: run here. slurm: submit one job per server profile x variant (GPUs = tp) and an aggregation job "
            "(analysis, gate) to Slurm through submitit; the run folder is created under --output, which the nodes must share."
        ),
    ] = "local",
    wait_for_lock: Annotated[
        float | None,
        typer.Option(
            "--wait-for-lock",
            metavar="SECONDS",
            min=0,
            help="With --resume: if another evalctl is writing the run folder, wait up to SECONDS for it to finish "
            "instead of refusing at once (then only what it left undone is sent).",
        ),
    ] = None,
    wait: Annotated[
        bool,
        typer.Option(
            help="With --executor slurm: block until the aggregation job ends and exit with the gate's verdict status; "
            "without it, print the run id and job ids and return at once.",
            rich_help_panel="Slurm",
        ),
    ] = False,
) -> None:
    """Launch server(s), run the task (GSM8K, prefix-recall or any lm-eval generate_until task)
    at each shot count with the prefix cache on and off, and report.

    An option left out keeps the config's value (a default shown is the field's, where the config sets none); --set
    reaches the fields that have no option.

    Also writes the gate's files (the config's gate_policy, else the default) and report.html into the run folder; the
    sweep's exit status says whether it ran, `evalctl gate` judges it. A hunt (--workload hunt) that found returns beyond
    the healthy spread on a build it could not call then follows them up into its folder's follow-up/ (--follow).

    Exit status (table: evalctl --help): PASS when all cells ran; RUN_FAILED when some server or cell
    failed (see summary); BAD_INPUT, also when another evalctl is writing the run folder (it is named;
    see --wait-for-lock); INTERNAL (e.g. the run folder cannot be created, or the disk refused a write:
    the file is named, every row so far is kept, the --resume command is printed); INTERRUPTED or
    TERMINATED by SIGINT/SIGTERM (records so far kept, servers stopped; finish with --resume). With
    --executor slurm: PASS once submitted; with --wait the gate's verdict, RUN_FAILED if no gate result.
    """
    if wait and executor != "slurm":
        raise fail("--wait applies to --executor slurm only")
    if executor == "slurm":
        from evalctl.cluster.slurm import require_slurm

        require_slurm()  # before anything is resolved, written or submitted
    if follow is not None:
        if resume is not None or model or config or url or executor == "slurm":
            raise fail("--follow takes its config from the run it follows: not with --resume, --model, --config, --url or Slurm")
        _follow_up(follow, overrides, api_key, wait_for_lock or 0, asked=True)
        return
    if resume is None:
        resolved, resume_point = resolve_config(model, config, url, overrides, engine, api_key), None
    else:  # the manifest's config, or the one named again, and where the run stopped
        from evalctl.resume import resume_config

        given = resolve_config(model, config, None, overrides) if model or config else None
        resolved, resume_point = resume_config(resume, given, overrides, url)
    if executor == "slurm":
        from evalctl.cli.slurm import sweep_on_slurm

        sweep_on_slurm(resolved, resume_point, api_key, wait, wait_for_lock or 0)
        return
    run_dir = _sweep_here(resolved, resume_point, api_key, wait_for_lock or 0)
    from evalctl.follow import follows_up

    if follows_up(resolved):
        _follow_up(run_dir, overrides, api_key, wait_for_lock or 0, asked=False)


def _follow_up(hunt_dir: Path, overrides: dict | None, api_key: str | None, wait_for_lock_s: float, *, asked: bool) -> None:
    """The follow-up of the hunt in `hunt_dir` (`asked`: by --follow), started or finished, then the hunt's gate files
    and report again, with its verdict in them."""
    from evalctl.follow import follow_config, no_lead
    from evalctl.report.finish import finish_run
    from evalctl.report.terminal import STATUS_STYLE
    from evalctl.resume import resume_config
    from evalctl.runs import load_run

    hunt = load_run(hunt_dir)
    earlier = hunt.follow_up
    if earlier is not None and earlier.manifest.status == "complete":
        if asked:
            raise fail(f"{hunt_dir} is followed up already ({earlier.path}): evalctl gate {hunt_dir} judges both")
        return
    if earlier is not None:  # interrupted: finished, not started again
        resolved, resume_point = resume_config(earlier.path, None, overrides or {})
    else:
        resolved, resume_point = follow_config(hunt, overrides), None
        if resolved is None:
            if asked:
                raise no_lead(hunt_dir)
            return
    leads = ", ".join(f"conversation {lead.conversation} return {lead.ret}" for lead in resolved.hunt.follow)
    console.print(f"following up the hunt's leads ({leads}) on {', '.join(v.name for v in resolved.active_variants())}")
    _sweep_here(resolved, resume_point, api_key, wait_for_lock_s)
    gate = finish_run(load_run(hunt_dir))
    console.print(
        f"gate of the hunt with its follow-up: [{STATUS_STYLE[gate.verdict]}]{gate.verdict}[/] - details: evalctl gate {hunt_dir}",
        highlight=False,
        soft_wrap=True,
    )


def _sweep_here(resolved: SweepConfig, resume_point: Run | None, api_key: str | None, wait_for_lock_s: float) -> Path:
    """The sweep on this machine: progress bars, stop signals, the writer lock, then the outputs."""
    from evalctl.execution import Sweep
    from evalctl.execution.folder import disk_message, interrupted_message
    from evalctl.report.progress import RichProgress
    from evalctl.signals import Interrupted, Shutdown

    shutdown = Shutdown()
    progress = RichProgress(console)
    runner = Sweep(resolved, progress=progress, api_key=api_key, shutdown=shutdown, resume=resume_point, wait_for_lock_s=wait_for_lock_s)
    with runner:  # the run folder's writer lock, held until the report is written
        try:
            with shutdown.install(), progress:
                result = runner.run()
            _finish_sweep(result, resolved)
            return result.run_dir
        except Interrupted as exc:
            err.print(interrupted_message(exc.args[0], runner.run_dir), highlight=False, soft_wrap=True)  # a path or command copied whole
            raise typer.Exit(exc.exit_status) from None
        except DiskError as exc:
            raise fail(disk_message(exc, runner.run_dir), exc.exit_status) from None


def _finish_sweep(result: SweepResult, resolved: SweepConfig) -> None:
    """The run's tables, gate files and report, written by the sweep that holds the lock."""
    from evalctl.analysis.flips import regressed_cell_flips
    from evalctl.cli.analyze import print_run_tables
    from evalctl.execution.stopping import sequential_baseline
    from evalctl.report.finish import REPORT_FILE, finish_run
    from evalctl.report.terminal import STATUS_STYLE, evidence_view, regressed_flips_table, tolerance_note, verdict_basis
    from evalctl.runs import load_run

    run = load_run(result.run_dir)  # loaded and summarised once, for the tables, the gate and the report
    # A sequential run's accuracy verdicts are its cells' decisions against the baseline, made
    # during the sweep; the baseline also gives the report its comparison.
    gate = finish_run(run, baseline=sequential_baseline(resolved))
    print_run_tables(run, gate)
    for failure in result.failures:
        err.print(f"[red]failed:[/red] {failure.server}: {failure.error}")
    if gate.verdict == "regression" and len(flips := regressed_cell_flips(run.samples, gate.checks, gate.policy.metric)):
        console.print(regressed_flips_table(flips))
    policy = resolved.gate_policy or "default"
    console.print(
        f"gate ({policy} policy, {tolerance_note(gate.policy)}): [{STATUS_STYLE[gate.verdict]}]{gate.verdict}[/]"
        f" - details: evalctl gate {result.run_dir}",
        highlight=False,
    )
    if resolved.canary:
        console.print(f"canary run: {resolved.canary} was injected in front of the cache-on servers on purpose", highlight=False)
    console.print(f"verdict rests on: {verdict_basis(gate)}", highlight=False, markup=False)  # "[cpu/default ...]" is not a style
    if gate.evidence and gate.evidence.checks:
        console.print(evidence_view(gate.evidence))
    console.print(f"report: {result.run_dir / REPORT_FILE}")
    console.print(f"run folder: {result.run_dir}")
    if result.failures:
        raise typer.Exit(ExitCode.RUN_FAILED)
