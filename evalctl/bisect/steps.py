"""One bisect step: an ordinary run folder of only the regressed cells of one build, and where it runs.

`--from-run` (a run whose gate says regression) gives the cells, the task, the questions, the
tolerance and the metric. The good build runs them first, fully, as the reference; every other step
runs them with sequential stopping against it, so a step ends once it is decided. A step runs here
(`local_runner`) or as one Slurm job at a time (`slurm_runner`: the next build depends on its verdict);
either takes up the run folder an interrupted bisect left (only its unanswered requests are sent).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from evalctl.analysis.drop_rule import decide_drops
from evalctl.analysis.gate import GatePolicy
from evalctl.analysis.gate_document import GATE_FILE, GateFileError, read_gate
from evalctl.bisect.search import Verdict
from evalctl.bisect.state import CellSpec, Step
from evalctl.config import config_from_dict
from evalctl.errors import BadInput
from evalctl.execution import Sweep, SweepProgress
from evalctl.execution.stopping import right_answers
from evalctl.manifest import Failure
from evalctl.records import CELL_KEYS
from evalctl.resume import resume_config
from evalctl.runs import Run, open_run
from evalctl.schema import SweepConfig, Variant
from evalctl.signals import Shutdown

ACCURACY_KINDS = ("accuracy", "sequential")
# Runs (or takes up) the one run folder of a step's config under its root: its path and launch failures.
StepRunner = Callable[[SweepConfig, Path], tuple[Path, list[Failure]]]


@dataclass(frozen=True)
class Regression:
    """What a regressed run hands the bisect: its config, the cells that regressed, the gate's tolerance and metric."""

    config: SweepConfig
    cells: CellSpec
    policy: GatePolicy


def regression_of(run_dir: Path) -> Regression:
    """The regressed cells (of the first regressed profile and variant) of a gated run; BadInput unless it regressed."""
    run = open_run(run_dir)
    try:
        gate = read_gate(run_dir)
    except GateFileError as exc:
        raise BadInput(f"cannot read --from-run's gate: {exc}") from None
    if gate is None:
        raise BadInput(f"--from-run {run_dir} has no {GATE_FILE}: gate it first (evalctl gate RUN --baseline GOOD_RUN)")
    if gate.verdict != "regression":
        raise BadInput(f"--from-run {run_dir}: its gate says {gate.verdict!r}, not regression: nothing to bisect")
    hits = [c for c in gate.checks if c.kind in ACCURACY_KINDS and c.status == "regression" and c.profile]
    if not hits:
        raise BadInput(f"--from-run {run_dir}: no accuracy check regressed (its regression is not one a bisect can test)")
    first = hits[0]
    mine = [c for c in hits if (c.profile, c.variant) == (first.profile, first.variant)]
    cells = CellSpec(
        profile=first.profile, variant=first.variant, shots=sorted({int(c.shots) for c in mine}), cache=sorted({str(c.cache) for c in mine})
    )
    config = config_from_dict(run.config, None, f"{run_dir}/manifest.json")
    return Regression(config, cells, gate.policy)


def step_config(
    regression: Regression, variant: Variant, root: Path, *, baseline: Path | None, tolerance: float, alpha: float
) -> SweepConfig:
    """The from-run's config cut to the regressed cells and one build (`variant`, named as the regressed one): every
    question without `baseline` (the endpoints), else a sequential run against it at `tolerance` and `alpha`."""
    cells = regression.cells
    data = regression.config.model_dump(mode="json")
    data.update(
        servers=[p for p in data["servers"] if p["name"] == cells.profile],
        variants=[{**variant.model_dump(mode="json"), "name": cells.variant}],
        run_variants=None,
        shots=cells.shots,
        cache=cells.cache,
        passes=1,
        output_dir=str(root),
        noise=False,
        probe=False,
    )
    data["stopping"] |= {
        "tolerance": tolerance,
        "metric": regression.policy.metric,
        "alpha": alpha,
        "mode": "sequential" if baseline else "fixed",
        "baseline": str(baseline) if baseline else None,
    }
    return config_from_dict(data, None, "the bisect step")


def run_folder(root: Path) -> Path | None:
    """The step's run folder under its results root, if the step got that far."""
    return min((p.parent for p in root.glob("*/manifest.json")), default=None)


def sweep_step(
    config: SweepConfig, root: Path, progress: SweepProgress | None = None, shutdown: Shutdown | None = None
) -> tuple[Path, list[Failure]]:
    """Run the step's sweep (or finish the one under `root`); its run folder and failures."""
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
    from evalctl.cluster.submit import part_executor

    def run(config: SweepConfig, root: Path) -> tuple[Path, list[Failure]]:
        scripts.mkdir(mode=0o700, parents=True, exist_ok=True)
        executor = part_executor(scripts, config, config.servers[0], f"bisect-{root.name}", requeue=False)
        return executor.submit(sweep_step, config, root).result()

    return run


def measure(step: Step, run: Run, reference: Run | None, metric: str) -> None:
    """Fill in the step's questions and accuracy, beside the reference's on the same questions."""
    step.run_dir = run.path
    decisions = run.manifest.decisions
    step.planned = sum(d.planned for d in decisions) if decisions else len(run.samples)
    step.answered = sum(d.answered for d in decisions) if decisions else len(run.samples)
    if not len(run.samples):
        return
    mine = right_answers(run.samples, metric)
    step.accuracy = float(mine.mean())
    if reference is not None and len(reference.samples):
        theirs = right_answers(reference.samples, metric)
        shared = mine.index.intersection(theirs.index)
        step.reference_accuracy = float(theirs.loc[shared].mean()) if len(shared) else None


def sequential_verdict(run: Run) -> tuple[Verdict, str]:
    """A sequential step's verdict from its cells' decisions."""
    decisions = run.manifest.decisions
    if any(d.verdict == "regression" for d in decisions):
        return Verdict.bad, "regression against the reference"
    if decisions and all(d.verdict == "pass" for d in decisions):
        return Verdict.good, "within the step's tolerance of the reference"
    return Verdict.unknown, "inconclusive at the plan's limit of questions"


@dataclass(frozen=True)
class EndpointJudgement:
    verdict: Verdict
    reason: str
    flips: tuple[int, int, int]  # right->wrong, wrong->right, pairs, pooled over the cells that regressed


def endpoint_verdict(run: Run, reference: Run, metric: str, tolerance: float, alpha: float, min_n: int) -> EndpointJudgement:
    """The bad endpoint (every question) against the reference by the gate's fixed-n rule, cell by cell (Holm)."""
    mine, theirs = right_answers(run.samples, metric), right_answers(reference.samples, metric)
    shared = mine.index.intersection(theirs.index)
    if shared.empty:
        return EndpointJudgement(Verdict.unknown, "no question pairs with the reference", (0, 0, 0))
    ref, cand = theirs.loc[shared], mine.loc[shared]
    cells = pd.DataFrame({"b": ref & ~cand, "c": ~ref & cand}).groupby(level=list(range(len(CELL_KEYS))))
    b, c, n = cells["b"].sum().to_numpy(), cells["c"].sum().to_numpy(), cells.size().to_numpy()
    status = decide_drops(b, c, n, tolerance, alpha, min_n).status
    hit = status == "regression"
    drops = ", ".join(f"{(bi - ci) / ni:+.3f}" for bi, ci, ni in zip(b, c, n))
    if hit.any():
        flips = (int(b[hit].sum()), int(c[hit].sum()), int(n[hit].sum()))
        return EndpointJudgement(Verdict.bad, f"reproduced: drop {drops} beyond the tolerance {tolerance}", flips)
    if (status == "pass").all():
        return EndpointJudgement(Verdict.good, f"not reproduced: drop {drops} within the tolerance {tolerance}", (0, 0, 0))
    return EndpointJudgement(Verdict.unknown, f"not reproduced: drop {drops} not shown beyond the tolerance {tolerance}", (0, 0, 0))
