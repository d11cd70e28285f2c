"""Every shipped alias's own default sweep can reach a decisive verdict on a healthy server (issue 45).

`evalctl sweep --model smollm2-135m-sglang` once sent 20 questions a cell against its policy's
`min_n` of 30: every accuracy and throughput check was inconclusive whatever the server answered
(measured: 4 of 4 and 12 of 12, 801 s). This test walks every alias `evalctl models list` shows
and derives, from the alias's config, its gate policy and its task's own prompts, with no server,
each check that cannot decide by construction:

- a cell of fewer questions than the policy's `min_n` (the accuracy, throughput and rate checks
  all judge a cell only from `min_n` answers on), or than a cell with no flipped answer needs for
  the drop rule to show its drop within the tolerance (`drop_rule`: 0.03 needs 103 pairs);
- fewer timed requests than the throughput check's rank test needs to show a slowdown within the
  tolerance even when every candidate request is faster (`checks/throughput.py`);
- an agreement floor (`checks/agreement_floor.py`) without its A/A arm (`noise: true`), or judging
  cache-on cells the arm does not repeat, or no cache-on cell at all;
- a comparison whose candidate cells have no reference cell, or nothing to compare at all
  (`checks/accuracy.py`'s `nothing_to_compare`);
- a policy metric the task does not score (the gate refuses it).

A cell's questions are counted by the task's own `prompts(shots, limit)` with the limit capped at
the most any finding here needs: whether a cell holds that many is all the test asks, and the full
count of a 1,319-question task at 20 shots takes minutes. Aliases of one task and seeds share its
prompts (the two Nemotron GSM8K aliases: about 10 s once, not twice).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import mannwhitneyu

from evalctl.agreement import AGREEMENT
from evalctl.analysis.drop_rule import decide_drops
from evalctl.analysis.floor import replaces_cache_accuracy
from evalctl.analysis.gate_policy import GatePolicy, load_policy
from evalctl.analysis.pairing import Comparison, match, within_run
from evalctl.config import config_from_dict, load_config
from evalctl.config_files import CONFIG_PATH_ENV, known
from evalctl.plan import expand, noise_cells
from evalctl.records import CELL_KEYS
from evalctl.schema import CacheMode, SweepConfig
from evalctl.tasks.lmeval import LmEvalTask, task_of

# Past this many pairs no finding below asks for more (GSM8K's test split is 1,319).
MOST_PAIRS = 2000
# The keys `floor.floor_comparison` pairs a cache-on cell with its A/A replica on.
FLOOR_KEYS = ("profile", "variant", "shots")
# The config fields `task_of` builds a task from.
TASK_FIELDS = {"task", "include_path", "data_dir", "fewshot", "generation", "limit_order", "limit_seed", "conversation"}
TASKS: dict[str, LmEvalTask] = {}

with pytest.MonkeyPatch.context() as patch:
    patch.delenv(CONFIG_PATH_ENV, raising=False)  # the shipped aliases, not a user's
    SHIPPED = list(known())


def fewest_pairs_to_pass(tolerance: float, policy: GatePolicy) -> int:
    """The fewest pairs at which a cell with no flipped answer passes the drop rule at `tolerance`."""
    n = np.arange(policy.min_n, MOST_PAIRS + 1)
    zero = np.zeros_like(n)
    passed = n[decide_drops(zero, zero, n, tolerance, policy.alpha, policy.min_n).status == "pass"]
    return int(passed[0]) if passed.size else MOST_PAIRS + 1


def fewest_requests_to_pass(policy: GatePolicy) -> int:
    """The fewest timed requests a side at which the throughput check can pass: `min_n`, and as many as
    its rank test needs to show the slowdown within the tolerance when every candidate request is faster."""
    shift = -np.log(1 - policy.max_throughput_drop)
    for n in range(policy.min_n, MOST_PAIRS + 1):
        faster, slower = np.arange(n) - 2 * n - shift, np.arange(n)  # log times, the candidate's shifted back as the check does
        if mannwhitneyu(faster, slower, alternative="less").pvalue <= policy.alpha:
            return n
    return MOST_PAIRS + 1


def shared_task(config: SweepConfig) -> LmEvalTask:
    """The config's task, built once for every alias of the same task settings (its prompts cached in it)."""
    key = config.model_dump_json(include=TASK_FIELDS)
    if key not in TASKS:
        TASKS[key] = task_of(config)
    return TASKS[key]


def cell_questions(task: LmEvalTask, shots: int, limit: int | None, most: int) -> int:
    """The questions a cell at `shots` holds under `limit`, counted up to `most` (see the module docstring)."""
    if task.generated:  # it makes as many questions as it is asked for: ask for the cell's own
        return min(most, len(task.prompts(shots, limit)))
    return len(task.prompts(shots, most if limit is None else min(limit, most)))


def unpaired(comparison: Comparison) -> pd.DataFrame:
    """The comparison's candidate cells with no reference cell to pair with."""
    paired = match(comparison)[CELL_KEYS].assign(paired=True)
    cells = comparison.candidate[CELL_KEYS].merge(paired, how="left")
    return cells[cells["paired"].isna()][CELL_KEYS]


def floor_findings(config: SweepConfig, cells: pd.DataFrame) -> list[str]:
    """Why the agreement floor cannot judge some cache-on cell: no arm, or no arm cell to pair with."""
    warm = cells[cells["cache"] == CacheMode.on.value]
    if warm.empty:
        return ["agreement floor: no cache-on cell to judge against the floor"]
    if not config.noise:
        return ["agreement floor without its A/A arm: set `noise: true`"]
    arm = pd.DataFrame([cell.as_dict() for launch in expand(config) for cell in noise_cells(config, launch)])
    left = unpaired(Comparison("floor", "floor", arm, warm, FLOOR_KEYS, "A/A replica"))
    if left.empty:
        return []
    shots = ", ".join(map(str, sorted(set(left["shots"]))))
    return [f"agreement floor: {len(left)} cache-on cell(s) the A/A arm does not repeat (shots {shots})"]


def comparison_findings(config: SweepConfig, policy: GatePolicy, cells: pd.DataFrame) -> list[str]:
    """Comparisons the accuracy check would judge with nothing to pair, or none at all (as the gate builds them)."""
    comparisons = within_run(cells, config.variants[0].name, config.servers[0].name)
    if replaces_cache_accuracy(policy):
        comparisons = [c for c in comparisons if c.kind != "cache"]  # the floor judges it (checks/accuracy.py)
    elif not comparisons:
        return ["nothing to compare: one cache mode, variant, profile and pass"]
    return [f"{c.name}: {len(left)} candidate cell(s) with no reference cell" for c in comparisons if len(left := unpaired(c))]


def by_construction(config: SweepConfig, policy: GatePolicy, task: LmEvalTask) -> list[str]:
    """Every check of the alias's default sweep that cannot decide whatever a healthy server answers, and why."""
    policy = policy.model_copy(update={"metric": policy.metric.get(config.task) if isinstance(policy.metric, dict) else policy.metric})
    findings = []
    if policy.metric not in (None, AGREEMENT, *task.metric_names):
        findings.append(f"policy metric {policy.metric!r}: task {config.task} scores {', '.join(task.metric_names)}")
    cells = pd.DataFrame([cell.as_dict() for launch in expand(config) for cell in launch.cells])
    needs = {"accuracy": fewest_pairs_to_pass(policy.max_accuracy_drop, policy)}
    if set(config.cache) == {CacheMode.on, CacheMode.off} or len(config.variants) > 1:  # a comparison the first-attempt check judges
        needs["first attempts"] = fewest_pairs_to_pass(policy.max_first_attempt_failure_increase, policy)
    if policy.agreement_floor is not None:
        needs["agreement floor"] = fewest_pairs_to_pass(policy.floor_margin, policy)
        findings += floor_findings(config, cells)
    if policy.max_throughput_drop is not None:
        needs["throughput"] = fewest_requests_to_pass(policy)
    most = max(needs.values())
    held = pd.Series({shots: cell_questions(task, shots, config.limit, most) for shots in config.shots})
    for count, at in held.groupby(held).groups.items():
        short = ", ".join(f"{check} needs {need}" for check, need in needs.items() if count < need)
        if short:
            shots = ", ".join(map(str, at))
            findings.append(f"shots {shots}: {count} questions a cell; {short} (min_n {policy.min_n}; a cell with no flip)")
    return findings + comparison_findings(config, policy, cells)


@pytest.mark.parametrize("alias", SHIPPED)
def test_the_alias_default_sweep_leaves_no_check_inconclusive_by_construction(alias, monkeypatch):
    monkeypatch.delenv(CONFIG_PATH_ENV, raising=False)
    config = load_config(model=alias)
    findings = by_construction(config, load_policy(config.gate_policy), shared_task(config))
    assert not findings, f"{alias} (policy {config.gate_policy or 'default'}): " + "; ".join(findings)


# One server, prefix-recall (generated: no data to read) at 64 records, 40 questions a cell.
SMALL = {
    "model": "m",
    "task": "prefix-recall",
    "shots": [64],
    "cache": ["on", "off"],
    "limit": 40,
    "servers": [{"name": "a", "model_path": "m"}],
}


@pytest.mark.parametrize(
    ("fields", "policy", "found"),
    [
        ({}, {"max_accuracy_drop": 0.15}, []),
        ({}, {}, ["shots 64: 40 questions a cell; accuracy needs 103 (min_n 30; a cell with no flip)"]),
        ({}, {"max_accuracy_drop": 0.15, "max_first_attempt_failure_increase": 0.05}, ["shots 64: 40 questions a cell; first attempts"]),
        (
            {"shots": [16, 64], "limit": None},
            {"max_accuracy_drop": 0.15},
            ["shots 16: 16 questions a cell; accuracy needs 30, first attempts needs 30,"],
        ),
        ({"cache": ["on"]}, {"max_accuracy_drop": 0.15}, ["nothing to compare"]),
        ({}, {"max_accuracy_drop": 0.15, "metric": "exact"}, ["policy metric 'exact': task prefix-recall scores strict, flexible"]),
        ({}, {"metric": "agreement", "agreement_floor": "aa", "max_accuracy_drop": 0.15}, ["agreement floor without its A/A arm"]),
        (
            {"noise": True, "shots": [32, 64], "limit": 32},
            {"metric": "agreement", "agreement_floor": "aa", "max_accuracy_drop": 0.15},
            [],  # the arm repeats every shot count of every build (plan.noise_cells)
        ),
    ],
)
def test_each_kind_of_undecidable_check_is_found(fields, policy, found):
    config = config_from_dict({**SMALL, **fields}, None, "test")
    findings = by_construction(config, GatePolicy.model_validate(policy), shared_task(config))
    assert len(findings) == len(found) and all(f.startswith(want) for f, want in zip(findings, found)), findings
