"""The bisect loop: the reference, the bad endpoint, then the search's next build until a culprit or the budget.

bisect.json is saved before and after each step, so an interrupted bisect (SIGINT, kill -9, a lost
node) goes on with `--resume`: a finished step is never run again, the one in progress takes up its
own run folder.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from evalctl import venvs
from evalctl.bisect.builds import Build, checkout, git_builds, listed_builds, run_build, version_builds
from evalctl.bisect.search import LAUNCH_RETRIES, Find, Next, Observation, Verdict, answer, choose, step_tolerance
from evalctl.bisect.state import STATE_FILE, BisectState, Settings, Step
from evalctl.bisect.steps import Regression, StepRunner, endpoint_verdict, measure, sequential_verdict, step_config
from evalctl.errors import BadInput, EvalctlError, RunFailed
from evalctl.report.finish import finish_run
from evalctl.runs import Run, load_run


@dataclass
class Bisect:
    folder: Path
    state: BisectState
    regression: Regression
    runner: StepRunner
    on_step: Callable[[Step], None] = field(default=lambda step: None, kw_only=True)

    @property
    def builds(self) -> int:
        return len(self.state.builds)

    def save(self) -> None:
        self.state.save(self.folder)

    def search(self) -> Next:
        state = self.state
        observations = [Observation(s.build, s.verdict) for s in state.steps[1:] if s.verdict is not None and s.launched]
        failed = {i for i, b in enumerate(state.builds) if b.built is False}
        return choose(self.builds, observations, failed, state.settings.step_alpha, state.settings.target)

    def run(self) -> BisectState:
        state = self.state
        reference = self._test(0)
        if reference.verdict is not Verdict.good:
            raise RunFailed(f"the good build {state.builds[0].label} did not run: {reference.reason}")
        bad = self.builds - 1
        step = self._test(bad)
        while step.verdict is Verdict.skipped and self._launches_of(bad) <= LAUNCH_RETRIES and self._budget_left():
            step = self._test(bad)
        if step.verdict is not Verdict.bad:
            state.outcome, state.message = "not-reproduced", f"the bad build {state.builds[bad].label}: {step.reason}"
            self.save()
            return state
        while self._budget_left() and (nxt := self.search()).build is not None:
            self._test(nxt.build)
        final = self.search()
        state.culprit, state.probability = answer(final.culprit.builds, state.settings.find), final.culprit.probability
        what = "culprit" if state.settings.find is Find.regression else "first fixed build"
        if final.culprit.probability >= state.settings.target and len(final.culprit.builds) == 1:
            state.outcome = "culprit"
            state.message = f"{what}: {state.builds[state.culprit[0]].label} (posterior probability {final.culprit.probability:.3f})"
        else:
            state.outcome = "inconclusive"
            names = " or ".join(state.builds[i].label for i in state.culprit)
            why = "the launch budget is spent" if not self._budget_left() else "no build left whose test could decide"
            state.message = f"inconclusive ({why}): {what} most likely {names}, posterior probability {final.culprit.probability:.3f}"
        self.save()
        return state

    def _budget_left(self) -> bool:
        return self.state.launches < self.state.settings.max_launches

    def _launches_of(self, build: int) -> int:
        return sum(s.launched for s in self.state.steps if s.build == build)

    def _test(self, index: int) -> Step:
        """Run one step on build `index` (or take up the one in progress); its verdict."""
        state = self.state
        done = self._finished(index)
        if done is not None:
            return done
        pending = next((s for s in state.steps if s.verdict is None), None)
        if pending is not None and pending.build != index:
            raise EvalctlError(f"bisect.json has step {pending.number} on build {pending.build} in progress, not {index}")
        build = state.builds[index]
        step = pending or Step(number=len(state.steps), build=index, root=self.folder / "steps" / f"{len(state.steps):02d}-{build.name}")
        if pending is None:
            state.steps.append(step)
        if state.settings.repo is not None:
            checkout(state.settings.repo, build)
        unbuildable = self._unbuildable(build)
        if unbuildable:
            step.launched, step.verdict, step.reason = False, Verdict.skipped, unbuildable
            self.save()
            self.on_step(step)
            return step
        self.save()  # the step is on record before it sends anything
        policy = self.regression.policy
        reference = None if index == 0 else load_run(state.steps[0].run_dir)
        endpoint = index in (0, self.builds - 1)
        tolerance = policy.max_accuracy_drop if endpoint else state.step_tolerance or policy.max_accuracy_drop
        config = step_config(
            self.regression, build.variant, step.root,
            baseline=None if endpoint or not self.sequential else state.steps[0].run_dir, tolerance=tolerance,
            alpha=state.settings.step_alpha,
        )  # fmt: skip
        run_dir, failures = self.runner(config, step.root)
        run = load_run(run_dir)
        measure(step, run, reference, policy.metric)
        if failures:
            step.verdict, step.reason = Verdict.skipped, f"launch failed: {failures[0].error}"
        elif index == 0:
            step.verdict, step.reason = Verdict.good, "reference: the good build, every question"
        else:
            self._judge(step, run, reference, endpoint, tolerance)
        # An ordinary run folder (gate files, report.html), gated at the tolerance and alpha it was judged with.
        stopped = {"max_accuracy_drop": config.stopping.tolerance, "alpha": config.stopping.alpha}
        finish_run(run, policy.model_copy(update=stopped) if reference is not None and not endpoint else policy, baseline=reference)
        self.save()
        self.on_step(step)
        return step

    @property
    def sequential(self) -> bool:
        """Whether search steps stop once decided: not for a conversation workload, which runs whole conversations
        (a stop mid-way would cut a history short); its steps run every request and are judged as the endpoints are."""
        return self.regression.config.workload is None

    def _judge(self, step: Step, run: Run, reference: Run, endpoint: bool, tolerance: float) -> None:
        """A step's verdict against the reference: the bad endpoint's (and a fixed-n search step's) by the gate's
        fixed-n rule, at the policy's tolerance and alpha (a search step: the steps' tolerance and alpha)."""
        policy, state = self.regression.policy, self.state
        if not endpoint and self.sequential:
            step.verdict, step.reason = sequential_verdict(run)
            return
        alpha = policy.alpha if endpoint else state.settings.step_alpha
        judged = endpoint_verdict(run, reference, policy.metric, tolerance, alpha, policy.min_n)
        step.verdict, step.reason = judged.verdict, judged.reason
        if endpoint:
            state.step_tolerance = step_tolerance(policy.max_accuracy_drop, *judged.flips)

    def _unbuildable(self, build: Build) -> str | None:
        """Why `build` cannot be served (its build command failed, or pip cannot install its version), else None:
        such a build is skipped, never called bad."""
        settings = self.state.settings
        if settings.build_command and not run_build(build, settings.build_command, self.folder / "builds"):
            return f"build failed (log {build.build_log})"
        if build.variant.pip:
            try:
                venvs.ensure(build.variant.pip)
            except venvs.VenvBuildError as exc:
                build.built = False
                return f"no venv: {exc}"
        return None

    def _finished(self, index: int) -> Step | None:
        """The endpoints' finished step, when resuming (the search never repeats a decided build)."""
        if index not in (0, self.builds - 1):
            return None
        return next((s for s in self.state.steps if s.build == index and s.verdict is not None and s.verdict is not Verdict.skipped), None)


def new_bisect(regression: Regression, from_run: Path, repo: Path | None, good: str | None, bad: str | None, builds: str | None,
               python: str | None, build: str | None, env: dict[str, str], all_commits: bool, output: Path | None,
               step_alpha: float, max_launches: int | None, executor: str, find: Find) -> tuple[Path, BisectState]:  # fmt: skip
    """A new bisect's folder and saved state: its builds listed (a git range, a YAML list, or released versions)."""
    from evalctl.bisect.search import TARGET, default_budget, search_order

    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    folder = output or from_run.resolve().parent / f"bisect-{stamp}"
    if (folder / STATE_FILE).exists():
        raise BadInput(f"{folder} already holds a bisect: go on with --resume {folder}, or choose another --output")
    regressed = next(v for v in regression.config.variants if v.name == regression.cells.variant)
    python = python if python is not None else regressed.python
    template = regressed.model_copy(update={"git_revision": None, "python": python, "env": {**regressed.env, **env}})
    folder.mkdir(parents=True, exist_ok=True)
    if repo is not None:  # oldest first: a fix's buggy revision (--bad) is the older one
        older, newer = (good, bad) if find is Find.regression else (bad, good)
        oldest_first = git_builds(repo, older, newer, template, folder.resolve() / "worktrees", all_commits)
    elif Path(builds).is_file():
        oldest_first = listed_builds(Path(builds))
    else:
        oldest_first = version_builds(builds, template)
    found = search_order(oldest_first, find)
    settings = Settings(
        from_run=from_run.resolve(),
        repo=repo.resolve() if repo else None,
        build_command=build,
        cells=regression.cells,
        step_alpha=step_alpha,
        target=TARGET,
        max_launches=max_launches or default_budget(len(found)),
        executor=executor,
        find=find,
    )
    state = BisectState(settings=settings, builds=found)
    state.save(folder)
    return folder, state
