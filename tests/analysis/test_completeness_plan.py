"""Completeness reads what the plan gave each cell, not the most any cell holds.

On prefix-recall without a `--limit` a cell at k records asks k questions (one per record):
the cells at 1, 2, 8 and 50 records hold 1, 2, 8 and 50 questions. Expecting the largest of every cell
made the small ones "incomplete" forever (`--resume` had nothing to send).
"""

from __future__ import annotations

from pathlib import Path

from frames import manifest_for, sample_frame

from evalctl.analysis.gate import GatePolicy, evaluate
from evalctl.config import validated
from evalctl.manifest import PlannedCell
from evalctl.plan import build
from evalctl.runs import Run
from evalctl.schema import SweepConfig

SHOTS, LIMIT = (1, 2, 8, 50), None


def recall_config() -> SweepConfig:
    return validated(
        {"model": "t", "task": "prefix-recall", "shots": list(SHOTS), "cache": ["on"], "limit": LIMIT,
         "servers": [{"name": "cpu", "engine": "llamacpp", "model_path": "bundled:smollm2-135m"}]}
    )  # fmt: skip


def completeness(plan: list[PlannedCell], found: dict[int, int]) -> list:
    df = sample_frame([dict(shots=s, doc_id=d, prompt_hash=f"{s}-{d}") for s in SHOTS for d in range(found[s])])
    manifest = manifest_for(df, limit=LIMIT).model_copy(update={"plan": plan})
    result = evaluate(Run(Path("r"), manifest, df), GatePolicy(min_n=1))
    return [c for c in result.checks if c.kind == "completeness"]


def test_the_plan_gives_each_recall_cell_as_many_questions_as_it_has_records_without_a_limit():
    assert {c.shots: c.questions for c in build(recall_config()).record()} == {1: 1, 2: 2, 8: 8, 50: 50}


def test_a_run_with_every_planned_question_is_complete_and_a_short_cell_is_named():
    plan = build(recall_config()).record()
    questions = {c.shots: c.questions for c in plan}
    assert [c.status for c in completeness(plan, questions)] == ["pass"]
    (short,) = completeness(plan, {**questions, 8: 7})
    assert (short.status, short.shots, short.value, short.threshold) == ("inconclusive", 8, 7, 8)
    # A cell the plan holds and the records lack entirely is missing, not absent from the comparison.
    (missing,) = completeness([*plan, plan[0].model_copy(update={"variant": "other"})], questions)
    assert (missing.variant, missing.value, missing.threshold) == ("other", 0, 1)


def test_a_manifest_that_records_no_plan_is_not_complete():
    (check,) = completeness([], {s: s for s in SHOTS})
    assert (check.status, check.reason) == ("inconclusive", "incomplete: the manifest records no plan")
