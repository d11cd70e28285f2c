"""Sequential stopping during a sweep: waves at the design's looks, a decision after each.

Every cell is a candidate against the same cell of a baseline run, paired by question and prompt hash
as the gate pairs runs; a decided cell sends nothing more, and its decision (the manifest's `decisions`)
is its accuracy verdict in the gate. Cells of one planned size share their looks and form one Holm
family, each family at its share of the cells' alpha (`analysis.sequential`, "Across families").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

import numpy as np
import pandas as pd

from evalctl.agreement import AGREEMENT
from evalctl.analysis.gate_policy import load_policy
from evalctl.analysis.pairing import QUESTION_KEYS
from evalctl.analysis.sequential import CellStatus, Design, decide
from evalctl.cell import CellKey
from evalctl.errors import BadInput
from evalctl.manifest import CellDecision
from evalctl.plan import CellPlan
from evalctl.records import CELL_KEYS, SampleRecord, primary_metric
from evalctl.runs import Run, load_run
from evalctl.schema import StoppingConfig, StoppingMode, SweepConfig

QuestionKey = tuple[int, str]


def with_policy_settings(config: SweepConfig) -> SweepConfig:
    """A sequential config with the decision settings its `stopping:` section leaves unset taken from its gate policy
    (tolerance = max_accuracy_drop, alpha, metric, min_n), so the manifest records the values the cells were stopped
    by and a plain `evalctl gate` agrees with them. BadInput if the policy cannot be read, and for the agreement metric.
    """
    stopping = config.stopping
    if stopping.mode is not StoppingMode.sequential:
        return config
    policy = load_policy(config.gate_policy)
    metric = policy.metric.get(config.task) if isinstance(policy.metric, dict) else policy.metric
    taken = {"tolerance": policy.max_accuracy_drop, "alpha": policy.alpha, "metric": metric, "min_n": policy.min_n}
    stopping = stopping.model_copy(update={k: v for k, v in taken.items() if getattr(stopping, k) is None})
    if stopping.metric == AGREEMENT:
        raise BadInput(
            "sequential stopping compares each answer with the baseline run's, so it cannot judge by the agreement metric "
            "(a server against its own cache-off answers): set stopping.metric to a metric of the task"
        )
    return config.model_copy(update={"stopping": stopping})


def sequential_baseline(config: SweepConfig, cells: Iterable[CellKey] = ()) -> Run | None:
    """The baseline run a sequential sweep compares with (None for fixed-n), checked before anything is written
    to be complete and to hold the planned `cells`."""
    stopping = config.stopping
    if stopping.mode is not StoppingMode.sequential or stopping.baseline is None:
        return None
    baseline = load_run(stopping.baseline)
    if baseline.manifest.status != "complete":
        raise BadInput(f"baseline run {baseline.path} has status {baseline.manifest.status!r}: need a complete one")
    if baseline.samples.empty:
        raise BadInput(f"baseline run {baseline.path} holds no records")
    # Only a cell the baseline holds can be decided; one it lacks would run every question for nothing.
    held = set(CellKey.in_frame(baseline.samples))
    missing = sorted({cell.label for cell in cells if cell not in held})
    if missing:
        raise BadInput(f"baseline run {baseline.path} has no rows for {len(missing)} planned cell(s): {', '.join(missing[:6])}")
    return baseline


def right_answers(samples: pd.DataFrame, metric: str) -> pd.Series:
    """Whether each question of each cell (its last row) was answered right; a failed request is wrong, as in the gate."""
    keys = [*CELL_KEYS, *QUESTION_KEYS]
    return samples.drop_duplicates(keys, keep="last").set_index(keys)[f"{metric}_correct"].fillna(False).astype(bool)


def _outcomes(samples: pd.DataFrame, metric: str) -> dict[CellKey, dict[QuestionKey, bool]]:
    out: dict[CellKey, dict[QuestionKey, bool]] = {}
    if samples.empty:
        return out
    for (*cell, doc_id, prompt_hash), right in right_answers(samples, metric).items():
        out.setdefault(CellKey.from_row(dict(zip(CELL_KEYS, cell))), {})[(int(doc_id), prompt_hash)] = bool(right)
    return out


class Stopper:
    """Decides, after each wave, whether a cell is done; remembers the decisions in `decisions`."""

    def __init__(
        self,
        stopping: StoppingConfig,
        baseline: pd.DataFrame,
        cells: list[CellPlan],
        *,
        decisions: list[CellDecision],
        save: Callable[[], None],
        recorded: pd.DataFrame | None = None,
    ):
        self.metric = primary_metric(baseline, stopping.metric)  # the baseline's task is this run's
        sizes = Counter(len(cell.prompts) for cell in cells if cell.prompts)
        settings = stopping.model_dump(include={"tolerance", "alpha", "min_n", "growth", "e_share"})
        share = {n: stopping.regression_share * count / sizes.total() for n, count in sizes.items()}
        self.designs = {n: Design(n_max=n, **settings, regression_share=share[n]) for n in sizes}
        self.size = {cell.key: len(cell.prompts) for cell in cells}
        self.order = {cell.key: [(p.doc_id, p.prompt_hash) for p in cell.send_order] for cell in cells}
        self.reference = _outcomes(baseline, self.metric)
        self.answers = _outcomes(recorded if recorded is not None else pd.DataFrame(), self.metric)
        self.decisions = decisions
        self.save = save

    def look_sizes(self, cell: CellKey) -> list[int]:
        """The cell's looks: paired questions at each, the last its planned size."""
        return [int(n) for n in self.designs[self.size[cell]].look_sizes]

    def decided(self, cell: CellKey) -> CellDecision | None:
        return next((d for d in self.decisions if d.cell == cell), None)

    def record(self, record: SampleRecord, settled: bool) -> None:
        """Note a written row; only settled ones (not to be retried) count."""
        if settled:
            answers = self.answers.setdefault(CellKey.from_record(record), {})
            answers[(record.doc_id, record.prompt_hash)] = bool(record.correct.get(self.metric))

    def _counts(self, key: CellKey) -> np.ndarray:
        """Flips b, c and pairs n at each look the cell has reached; NaN beyond.

        Look k is reached once the first `look_sizes[k]` *paired* questions of the send order are answered, so n is
        the look's planned size and the design's information fractions hold. A look the baseline's questions cannot
        fill is never reached: the cell ends undecided (inconclusive in the gate), never an error.
        """
        sizes = self.look_sizes(key)
        counts = np.full((3, len(sizes)), np.nan)
        answers, reference = self.answers.get(key, {}), self.reference.get(key, {})
        paired = [q for q in self.order[key] if q in reference]
        for look, size in enumerate(sizes):
            questions = paired[:size]
            if len(questions) < size or any(q not in answers for q in questions):
                break
            pairs = [(reference[q], answers[q]) for q in questions]
            counts[:, look] = (sum(r and not a for r, a in pairs), sum(a and not r for r, a in pairs), size)
        return counts

    def check_recorded(self, cell: CellKey) -> None:
        """Decide an undecided cell with nothing left to send (a run stopped before its decision), look by look."""
        for look in range(len(self.look_sizes(cell))):
            if self.decided(cell) or self.check(cell, look):
                return

    def check(self, cell: CellKey, look: int) -> CellDecision | None:
        """After the wave up to `look` (0-based): the cell's decision if its family decides it now."""
        family = [key for key, size in self.size.items() if size == self.size[cell]]
        counts = np.stack([self._counts(k) for k in family], axis=1)  # (3, cells, looks)
        index = family.index(cell)
        if np.isnan(counts[2, index, look]):
            return None
        counts[:, index, look + 1 :] = np.nan  # judged on the looks reached, even when a resumed run recorded more
        design = self.designs[self.size[cell]]
        decided = decide(*counts, design)
        status = CellStatus(int(decided.status[index]))
        if status is CellStatus.RUNNING:
            return None
        decision = CellDecision(
            **cell.as_dict(),
            verdict=status.name.lower(),  # the gate's names
            look=look + 1,
            answered=int(design.look_sizes[look]),
            planned=design.n_max,
            by_e_process=bool(decided.by_e_process[index]),
            b=int(counts[0, index, look]),
            c=int(counts[1, index, look]),
            n=int(counts[2, index, look]),
            drift=bool(decided.drift[index]),
        )
        self.decisions.append(decision)
        self.save()
        return decision
