"""`evalctl bisect`: from a run whose gate says regression to the build (commit) that did it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evalctl.bisect.search import Find
from evalctl.cli.common import console, err, fail
from evalctl.cli.options import Executor, key_values
from evalctl.errors import ExitCode


def bisect(
    from_run: Annotated[
        Path | None,
        typer.Option(help="A run folder whose gate says regression: its regressed cells, task, questions, tolerance and policy."),
    ] = None,
    repo: Annotated[Path | None, typer.Option(help="The engine's git repository; builds are the commits --good..--bad.")] = None,
    good: Annotated[str | None, typer.Option(help="A revision known good (the last passing night's).")] = None,
    bad: Annotated[str | None, typer.Option(help="A revision known bad (the first failing night's).")] = None,
    all_commits: Annotated[
        bool, typer.Option("--all-commits", help="Include merged branches' commits (default: first parent only).")
    ] = False,
    build: Annotated[
        str | None, typer.Option("--build", help="Shell command run in each commit's worktree before it is served (cached by commit).")
    ] = None,
    python: Annotated[
        str | None, typer.Option(help="The build's interpreter; {worktree} is the commit's worktree (default: the from-run variant's).")
    ] = None,
    env: Annotated[
        list[str] | None, typer.Option(help='KEY=VALUE for the server, repeatable; e.g. PYTHONPATH="{worktree}/python" for SGLang.')
    ] = None,
    builds: Annotated[
        str | None,
        typer.Option(
            help="Instead of --repo: a YAML file listing variants (wheels, containers, venvs), or released versions "
            "PACKAGE==V1,V2,... (e.g. xllamacpp==0.2.13,0.2.14,2026.5.9294: each served from a cached venv); oldest first."
        ),
    ] = None,
    find: Annotated[
        Find,
        typer.Option(
            help="regression: the first bad build (the oldest is good); fix: the first good build, for a bug a later build fixed "
            "(the newest is good: --good names the fixed revision, --bad the buggy one)."
        ),
    ] = Find.regression,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="The bisect folder (default: bisect-<time> beside the from-run).")
    ] = None,
    max_launches: Annotated[
        int | None, typer.Option(min=2, help="Launches in all, endpoints included (default: 2 + 2 log2(builds) + 4).")
    ] = None,
    step_alpha: Annotated[
        float, typer.Option(min=0.001, max=0.025, help="Each step's error bound; the posterior needs it below about 0.026.")
    ] = 0.02,
    resume: Annotated[Path | None, typer.Option(help="Go on with an interrupted bisect in this folder (its bisect.json).")] = None,
    executor: Annotated[
        Executor, typer.Option(help="local: run steps here; slurm: submit one step at a time as a Slurm job and wait for it.")
    ] = "local",
) -> None:
    """Find the build that turned a pass into a regression, with a noise-aware search.

    The good build is run first, fully, as the reference; then the bad one, which must reproduce the
    regression; then the build the culprit posterior's median points at, each step an ordinary run folder of
    only the regressed cells, stopped by the sequential rule once decided. Goes on until one build holds
    posterior probability >= 0.95 or --max-launches is spent. A build that fails to build or launch is
    skipped, never called bad.

    Exit status (table: evalctl --help): PASS (0) culprit found; INCONCLUSIVE (2) no culprit at 0.95, or the
    bad build did not reproduce the regression; RUN_FAILED (3) the good build could not be run; BAD_INPUT (4);
    INTERRUPTED/TERMINATED (go on with --resume DIR).
    """
    from evalctl.bisect.report import PLOT_FILE, accuracy_plot, steps_table
    from evalctl.bisect.session import Bisect, new_bisect
    from evalctl.bisect.state import STATE_FILE, load_state
    from evalctl.bisect.steps import regression_of
    from evalctl.signals import Interrupted, Shutdown

    if resume is not None:
        if any(x is not None for x in (from_run, repo, good, bad, builds, python, build)) or env:
            raise fail("--resume takes the bisect folder alone: its bisect.json holds everything it was started with")
        folder, state = resume, load_state(resume)
        regression = regression_of(state.settings.from_run)
    else:
        if from_run is None:
            raise fail("--from-run RUN is required: a run whose gate says regression")
        _check_build_options(repo, good, bad, builds, build, all_commits)
        regression = regression_of(from_run)
        server_env = dict(key_values(env, "--env"))
        folder, state = new_bisect(regression, from_run, repo, good, bad, builds, python, build, server_env, all_commits, output,
                                   step_alpha, max_launches, executor, find)  # fmt: skip
    folder = folder.resolve()
    err.print(f"bisect: {len(state.builds)} builds, cells {regression.cells.profile}/{regression.cells.variant} "
              f"shots {regression.cells.shots} cache {regression.cells.cache}; folder {folder}")  # fmt: skip

    def shown(step) -> None:
        console.print(
            f"step {step.number}: build {step.build} {state.builds[step.build].label[:40]}: "
            f"{step.verdict.value if step.verdict else '?'} ({step.reason})",
            highlight=False,
        )

    shutdown = Shutdown()
    session = Bisect(folder, state, regression, _step_runner(state, folder, shutdown), on_step=shown)
    try:
        with shutdown.install():
            state = session.run()
    except Interrupted as exc:
        err.print(f"interrupted by {exc.args[0]}; go on with: evalctl bisect --resume {folder}")
        raise typer.Exit(exc.exit_status) from None
    console.print(steps_table(state))
    plot = accuracy_plot(state, folder / PLOT_FILE)
    style = "bold green" if state.outcome == "culprit" else "yellow"
    console.print(f"[{style}]{state.message}[/]", highlight=False)
    console.print(f"launches: {state.launches} (of at most {state.settings.max_launches}); plot: {plot}; state: {folder / STATE_FILE}")
    raise typer.Exit(ExitCode.PASS if state.outcome == "culprit" else ExitCode.INCONCLUSIVE)


def _check_build_options(
    repo: Path | None, good: str | None, bad: str | None, builds: str | None, build: str | None, all_commits: bool
) -> None:
    """Where the builds come from: a git range or a list, not both, each with what it needs."""
    if (repo is None) == (builds is None):
        raise fail("give either --repo with --good and --bad, or --builds FILE or PACKAGE==V1,V2,...")
    if repo is not None and (good is None or bad is None):
        raise fail("--repo needs --good REV and --bad REV")
    if builds is not None and (good or bad or build or all_commits):
        raise fail("--good, --bad, --build and --all-commits go with --repo, not --builds")


def _step_runner(state, folder: Path, shutdown):
    """Where each step runs: this machine with progress bars, or one Slurm job a step."""
    from evalctl.bisect.steps import local_runner, slurm_runner
    from evalctl.report.progress import RichProgress

    if state.settings.executor != "slurm":
        return local_runner(lambda: RichProgress(console), shutdown)
    from evalctl.cluster.slurm import require_slurm

    require_slurm()
    return slurm_runner(folder / "slurm")
