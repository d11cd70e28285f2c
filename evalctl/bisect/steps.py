"""One bisect step: an ordinary run folder of only the regressed cells of one build.

`--from-run` (a run whose gate says regression) gives the cells, the task, the questions, the
tolerance and the metric. The good build runs them first, fully, as the reference (a fixed-n
run); every other step runs them with sequential stopping against that reference
(`execution.stopping`, `analysis.sequential`), so a step ends once it is decided and goes on
to the plan's limit of questions, on the same launch, while it is not. A step's verdict is
its cells' decisions: any regression -> bad, every cell passed -> good, otherwise unknown;
a launch that failed -> skipped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from evalctl.analysis.pairing import QUESTION_KEYS
from evalctl.bisect.search import Verdict
from evalctl.bisect.state import CellSpec, Step
from evalctl.config import SweepConfig, Variant, config_from_dict
from evalctl.errors import BadInput
from evalctl.manifest import Failure
from evalctl.records import CELL_KEYS
from evalctl.report.gate_outputs import GATE_JSON
from evalctl.runs import Run, load_run, open_run

ACCURACY_KINDS = ("accuracy", "sequential")


class FromRunError(BadInput):
    """A --from-run that cannot start a bisect; the message says why."""


@dataclass(frozen=True)
class Regression:
    """What a regressed run hands the bisect: its config, the cells that regressed, the gate's tolerance and metric."""

    config: SweepConfig
    cells: CellSpec
    tolerance: float
    metric: str


def regression_of(run_dir: Path) -> Regression:
    """The regressed cells (of the first regressed profile and variant) of a gated run; FromRunError unless it regressed."""
    run = open_run(run_dir)
    try:
        gate = json.loads((run_dir / GATE_JSON).read_text())
    except FileNotFoundError:
        raise FromRunError(f"--from-run {run_dir} has no {GATE_JSON}: gate it first (evalctl gate RUN --baseline GOOD_RUN)") from None
    except (OSError, ValueError) as exc:
        raise FromRunError(f"cannot read {run_dir / GATE_JSON}: {exc}") from None
    if gate.get("verdict") != "regression":
        raise FromRunError(f"--from-run {run_dir}: its gate says {gate.get('verdict')!r}, not regression: nothing to bisect")
    hits = [c for c in gate.get("checks", []) if c.get("kind") in ACCURACY_KINDS and c.get("status") == "regression" and c.get("profile")]
    if not hits:
        raise FromRunError(f"--from-run {run_dir}: no accuracy check regressed (its regression is not one a bisect can test)")
    first = hits[0]
    mine = [c for c in hits if (c["profile"], c["variant"]) == (first["profile"], first["variant"])]
    cells = CellSpec(
        profile=first["profile"],
        variant=first["variant"],
        shots=sorted({int(c["shots"]) for c in mine}),
        cache=sorted({str(c["cache"]) for c in mine}),
    )
    policy = gate.get("policy", {})
    config = config_from_dict(run.config, None, f"{run_dir}/manifest.json")
    return Regression(config, cells, float(policy.get("max_accuracy_drop", 0.03)), str(policy.get("metric", "strict")))


def step_config(regression: Regression, variant: Variant, root: Path, baseline: Path | None, alpha: float) -> SweepConfig:
    """The from-run's config cut to the regressed cells and one build (`variant`, named as the regressed one).

    Without `baseline` the reference run (every question); with it, a sequential run against it.
    """
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
    stopping = {"tolerance": regression.tolerance, "metric": regression.metric, "alpha": alpha}
    data["stopping"] = {**data["stopping"], **stopping, "mode": "sequential" if baseline else "fixed", "baseline": str(baseline) if baseline else None}
    return config_from_dict(data, None, "the bisect step")


def run_folder(root: Path) -> Path | None:
    """The step's run folder under its results root, if the step got that far."""
    found = sorted(p for p in root.glob("*/manifest.json")) if root.is_dir() else []
    return found[0].parent if found else None


def _right(samples: pd.DataFrame, metric: str) -> pd.Series:
    keyed = samples.drop_duplicates([*CELL_KEYS, *QUESTION_KEYS], keep="last").set_index([*CELL_KEYS, *QUESTION_KEYS])
    return keyed[f"{metric}_correct"].fillna(False).astype(bool)


def judge(step: Step, run: Run, reference: Run | None, failures: list[Failure], metric: str) -> None:
    """Fill in `step` from its finished run: verdict, questions, accuracy beside the reference's on the same questions."""
    step.run_dir = run.path
    decisions = run.manifest.decisions
    step.planned = sum(d.planned for d in decisions) if decisions else len(run.samples)
    step.answered = sum(d.answered for d in decisions) if decisions else len(run.samples)
    if len(run.samples):
        mine = _right(run.samples, metric)
        step.accuracy = float(mine.mean())
        if reference is not None and len(reference.samples):
            theirs = _right(reference.samples, metric)
            shared = mine.index.intersection(theirs.index)
            step.reference_accuracy = float(theirs.loc[shared].mean()) if len(shared) else None
    if failures:
        step.verdict, step.reason = Verdict.skipped, f"launch failed: {failures[0].error}"
    elif reference is None:
        step.verdict, step.reason = Verdict.good, "reference (the good build, every question)"
    elif any(d.reason == "regression" for d in decisions):
        step.verdict, step.reason = Verdict.bad, "regression against the reference"
    elif decisions and all(d.reason == "pass" for d in decisions):
        step.verdict, step.reason = Verdict.good, "within tolerance of the reference"
    else:
        step.verdict, step.reason = Verdict.unknown, "inconclusive at the plan's limit of questions"


def reference_run(step: Step) -> Run:
    if step.run_dir is None:
        raise BadInput("the reference step has no run folder")
    return load_run(step.run_dir)
