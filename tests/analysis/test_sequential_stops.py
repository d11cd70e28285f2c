"""The sequential gate inside a run: the stopper's decisions over recorded answers, and the gate reading its stops."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from frames import manifest_for, sweep_frame

from evalctl.analysis.gate import GatePolicy, evaluate
from evalctl.analysis.sequential import Design
from evalctl.cell import CellKey
from evalctl.execution.stopping import Stopper
from evalctl.manifest import CellDecision
from evalctl.plan import CellPlan
from evalctl.runs import Run
from evalctl.schema import CacheMode, StoppingConfig
from evalctl.tasks.lmeval import Prompt

N = 200
SHOTS = (8, 16)
# The decision settings as a sweep resolves them from the default gate policy (`with_policy_settings`).
SEQUENTIAL = StoppingConfig(mode="sequential", baseline=Path("base"), tolerance=0.03, alpha=0.05, min_n=30)
CELLS = [CellKey("cpu", "default", CacheMode(cache), shots, 4, 1) for cache in ("off", "on") for shots in SHOTS]


def prompts(shots: int, n: int = N) -> list[Prompt]:
    order = np.random.default_rng(7).permutation(n)  # the seeded send order: any prefix a random sample
    return [Prompt(int(d), f"p{d}", f"{shots}-{d}", "q", "t", (), {}) for d in order]


def planned(cell: CellKey, n: int = N) -> CellPlan:
    return CellPlan(cell, tuple(sorted(prompts(cell.shots, n), key=lambda p: p.doc_id)), tuple(prompts(cell.shots, n)), ())


def stopper(candidate, decisions: list[CellDecision], saves: list[int], base=None) -> Stopper:
    base = sweep_frame(N, SHOTS, run_id="base") if base is None else base
    cells = [planned(cell) for cell in CELLS]
    return Stopper(SEQUENTIAL, base, cells, decisions=decisions, save=lambda: saves.append(1), recorded=candidate)


def run_cells(candidate) -> tuple[dict[CellKey, CellDecision | None], list[CellDecision], list[int]]:
    """Every cell through its looks as the sweep runs them; the decision of each, the manifest's decisions, the saves."""
    stops, saves = [], []
    gate = stopper(candidate, stops, saves)
    found = {}
    for cell in CELLS:
        found[cell] = next((stop for look in range(len(gate.look_sizes(cell))) if (stop := gate.check(cell, look))), None)
    return found, stops, saves


def test_a_collapsed_cell_stops_early_with_a_regression_and_healthy_cells_never_do():
    collapsed = CellKey("cpu", "default", CacheMode.on, 16, 4, 1)
    found, stops, saves = run_cells(sweep_frame(N, SHOTS, to_wrong={16: set(range(0, 160, 2))}, run_id="cand"))
    stop = found[collapsed]
    assert stop is not None and stop.verdict == "regression"
    assert stop.answered <= 0.3 * N and stop.saved == N - stop.answered and stop.planned == N
    assert all(s is None or s.verdict == "pass" for c, s in found.items() if c != collapsed)
    assert stops == [s for s in found.values() if s is not None] and len(saves) == len(stops)


def test_a_healthy_run_passes_cells_before_their_last_question():
    found, _, _ = run_cells(sweep_frame(N, SHOTS, run_id="cand"))
    assert {s.verdict for s in found.values() if s} == {"pass"}
    assert all(s is not None and s.answered < N for s in found.values())


def test_a_cell_undecided_until_its_last_look_gets_its_decision_there():
    """A 5-point drop in 200 questions: neither side is shown early; the last look records the verdict with nothing saved."""
    found, decisions, _ = run_cells(sweep_frame(N, SHOTS, to_wrong={16: set(range(0, 200, 20))}, run_id="cand"))
    late = [d for c, d in found.items() if c.cache is CacheMode.on and c.shots == 16]
    (last,) = late
    assert last is not None and (last.answered, last.saved, last.look) == (N, 0, len(Design(N, 0.03).look_sizes))
    assert last.verdict in ("inconclusive", "regression") and last in decisions


def test_a_cell_is_not_judged_on_a_look_it_has_not_fully_answered():
    candidate = sweep_frame(N, SHOTS, to_wrong={16: set(range(160))}, run_id="cand")
    candidate = candidate[~((candidate["shots"] == 16) & (candidate["cache"] == "on") & (candidate["doc_id"] == prompts(16)[0].doc_id))]
    gate = stopper(candidate, [], [])
    cell = CellKey("cpu", "default", CacheMode.on, 16, 4, 1)
    assert all(gate.check(cell, look) is None for look in range(len(gate.look_sizes(cell))))


def test_each_cell_is_sized_by_its_own_planned_questions():
    """prefix-recall at several shot counts plans cells of different sizes: each one's looks end at its
    own count (sized by the first cell's, a larger cell stopped short and never finished), and cells
    of one size form a family at their share of the regression level."""
    small, large = CellKey("cpu", "default", CacheMode.on, 8, 4, 1), CellKey("cpu", "default", CacheMode.on, 16, 4, 1)
    cells = [planned(small, 40), planned(large), planned(CellKey("cpu", "default", CacheMode.off, 16, 4, 1))]
    gate = Stopper(SEQUENTIAL, sweep_frame(N, SHOTS, run_id="base"), cells, decisions=[], save=lambda: None,
                   recorded=sweep_frame(N, SHOTS, run_id="cand"))  # fmt: skip
    assert (gate.look_sizes(small)[-1], gate.look_sizes(large)[-1]) == (40, N)
    assert [gate.designs[n].regression_share for n in (40, N)] == [pytest.approx(1 / 3), pytest.approx(2 / 3)]
    last = {cell: gate.check(cell, len(gate.look_sizes(cell)) - 1) for cell in (small, large)}
    assert {cell: (d.planned, d.answered) for cell, d in last.items()} == {small: (40, 40), large: (N, N)}


def test_a_resumed_cell_whose_answers_are_all_recorded_is_decided_on_them():
    """Stopped after its last answer and before its decision, a cell has nothing to send: it is judged on its records."""
    cell = CELLS[0]
    decisions: list[CellDecision] = []
    gate = stopper(sweep_frame(N, SHOTS, run_id="cand"), decisions, [])
    gate.check_recorded(cell)
    (decided,) = decisions
    assert decided.cell == cell and decided.verdict == "pass" and decided.answered < N
    gate.check_recorded(cell)
    assert len(decisions) == 1  # decided once


def decision(cell: CellKey, reason: str, answered: int) -> CellDecision:
    return CellDecision(**cell.as_dict(), verdict=reason, look=3 if answered < N else 9, answered=answered, planned=N)


def sequential_run(cand, decisions: list[CellDecision]) -> Run:
    manifest = manifest_for(cand, limit=N)
    manifest.config["stopping"] = {"mode": "sequential", "baseline": "base", "tolerance": 0.03, "alpha": 0.05, "min_n": 30}
    manifest.decisions = decisions
    return Run(Path("cand"), manifest, cand)


@pytest.mark.parametrize("reason", ["regression", "pass"])
def test_the_gate_takes_each_cells_sequential_decision_and_accepts_a_stopped_cell(reason):
    base = sweep_frame(N, SHOTS, run_id="base")
    cand = sweep_frame(N, SHOTS, run_id="cand", to_wrong={16: set(range(0, 160, 2))} if reason == "regression" else None)
    order = [p.doc_id for p in prompts(16)][:40]
    stopped = (cand["cache"] == "on") & (cand["shots"] == 16)
    cand = cand[~stopped | cand["doc_id"].isin(order)]
    collapsed = CellKey("cpu", "default", CacheMode.on, 16, 4, 1)
    decisions = [decision(c, reason, 40) if c == collapsed else decision(c, "pass", N) for c in CELLS]
    result = evaluate(sequential_run(cand, decisions), GatePolicy(), Run(Path("base"), manifest_for(base), base))
    completeness = [c for c in result.checks if c.kind == "completeness"]
    assert [c.status for c in completeness] == ["pass", "pass"]
    assert result.verdict == reason
    # The fixed-n rule does not judge a sequential run: one verdict per cell, its decision.
    assert not [c for c in result.checks if c.kind == "accuracy"]
    shown = {(c.cache, c.shots): c for c in result.checks if c.kind == "sequential"}
    assert len(shown) == len(CELLS) and {c.status for k, c in shown.items() if k != ("on", 16)} == {"pass"}
    assert (shown["on", 16].status, shown["on", 16].value, shown["on", 16].n) == (reason, N - 40, 40)
    assert f"{N - 40} requests saved" in shown["on", 16].reason


def test_a_cell_of_a_sequential_run_without_a_decision_is_inconclusive():
    cand = sweep_frame(N, SHOTS, run_id="cand")
    missing = CellKey("cpu", "default", CacheMode.off, 8, 4, 1)
    result = evaluate(sequential_run(cand, [decision(c, "pass", N) for c in CELLS if c != missing]), GatePolicy())
    (undecided,) = [c for c in result.checks if c.kind == "sequential" and c.status != "pass"]
    assert (undecided.status, undecided.cache, undecided.shots) == ("inconclusive", "off", 8)
    assert result.verdict == "inconclusive"


def test_a_baseline_without_the_planned_cells_is_refused_before_anything_runs(tmp_path):
    import datetime as dt

    from report.run_folders import make_run

    from evalctl.config import validated
    from evalctl.errors import BadInput
    from evalctl.execution.stopping import sequential_baseline
    from evalctl.plan import expand

    baseline = make_run(tmp_path, "m", dt.datetime(2026, 11, 1), sweep_frame(N, SHOTS, run_id="base"))
    config = validated(
        {
            "model": "m",
            "shots": [*SHOTS, 20],
            "servers": [{"name": "cpu", "engine": "llamacpp", "model_path": "m.gguf"}],
            "stopping": {"mode": "sequential", "baseline": str(baseline)},
        }
    )
    with pytest.raises(BadInput, match=r"no rows for 2 planned cell\(s\): .*shots=20"):
        sequential_baseline(config, [cell for launch in expand(config) for cell in launch.cells])
    held = config.model_copy(update={"shots": list(SHOTS)})
    assert sequential_baseline(held, [cell for launch in expand(held) for cell in launch.cells]).path == baseline


def test_a_look_the_baseline_cannot_fill_is_not_reached_never_an_error():
    # Issue 25, item 4: the baseline holds none of the first look's questions, then only half
    # of the rest. Before: n = 0 raised ValueError from the score statistic.
    sent = [p.doc_id for p in prompts(8)]
    base = sweep_frame(N, SHOTS, run_id="base")
    base = base[~base["doc_id"].isin(sent[:40]) & ~base["doc_id"].isin(sent[40::2])]
    gate = stopper(sweep_frame(N, SHOTS, run_id="cand"), [], [], base)
    cell = CELLS[0]
    found = [gate.check(cell, look) for look in range(len(gate.look_sizes(cell)))]
    # Each look it reaches holds exactly its planned pairs (the design's fractions); the
    # last (200 pairs) is out of reach of the baseline's 80 questions: no verdict, no error.
    assert all(d is None or d.n == gate.look_sizes(cell)[d.look - 1] for d in found)
    assert all(d is None or d.reason == "pass" for d in found)


def test_a_cell_below_min_n_is_never_decided():
    # Issue 25, item 5: 20 questions, 5 flips (a 25-point drop). Before: one look at n_max = 20
    # decided "regression"; the fixed-n gate says inconclusive below min_n = 30.
    from evalctl.analysis.sequential import CellStatus, decide

    design = Design(20, 0.03)
    found = decide(np.array([[5.0]]), np.array([[0.0]]), np.array([[20.0]]), design)
    assert CellStatus(int(found.status[0])) is CellStatus.INCONCLUSIVE
    healthy = decide(np.array([[0.0]]), np.array([[0.0]]), np.array([[20.0]]), design)
    assert CellStatus(int(healthy.status[0])) is CellStatus.INCONCLUSIVE


def noisy_run(cand, decisions, noise_flips: int) -> Run:
    """A sequential run with an A/A arm whose replica flips `noise_flips` of cell on/16's answers right->wrong."""
    run = sequential_run(cand, decisions)
    replica = cand[(cand["cache"] == "on") & (cand["shots"] == 16)].copy()
    replica["strict_correct"] = replica["strict_correct"].astype(bool)
    flipped = replica.index[replica["strict_correct"]][:noise_flips]
    replica.loc[flipped, "strict_correct"] = False
    return Run(run.path, run.manifest, run.samples, given_noise=replica)


def test_a_sequential_regression_must_exceed_the_engines_own_noise():
    # Issue 25, item 6: a 10-point drop decided at look 3 (6 of 60 flipped), on an engine whose
    # A/A arm itself loses 10 points: the fixed-n gate would call it inconclusive, and so must this.
    cand = sweep_frame(N, SHOTS, run_id="cand")
    collapsed = CellKey("cpu", "default", CacheMode.on, 16, 4, 1)
    regression = decision(collapsed, "regression", 60).model_copy(update={"b": 6, "c": 0, "n": 60})
    decisions = [regression if c == collapsed else decision(c, "pass", N) for c in CELLS]
    quiet = evaluate(sequential_run(cand, decisions), GatePolicy())
    assert quiet.verdict == "regression"
    noisy = evaluate(noisy_run(cand, decisions, noise_flips=20), GatePolicy())
    (check,) = [c for c in noisy.checks if c.kind == "sequential" and (c.cache, c.shots) == ("on", 16)]
    assert check.status == "inconclusive" and "own noise" in check.reason and "A/A noise" in check.reason
    assert noisy.verdict == "inconclusive"


@pytest.mark.parametrize("change", [{"max_accuracy_drop": 0.05}, {"alpha": 0.1}, {"metric": "flexible"}, {"min_n": 50}])
def test_a_policy_other_than_the_runs_stopping_rule_is_refused(change):
    # Issue 25, item 6: the decisions were made at the stopping section's values; a gate
    # policy with others would print its own beside verdicts it did not make.
    from evalctl.errors import BadInput

    cand = sweep_frame(N, SHOTS, run_id="cand")
    run = sequential_run(cand, [decision(c, "pass", N) for c in CELLS])
    assert evaluate(run, GatePolicy()).verdict == "pass"
    with pytest.raises(BadInput, match=next(iter(change))) as raised:
        evaluate(run, GatePolicy(**change))
    assert isinstance(raised.value, BadInput)


def test_the_stopping_rule_takes_its_unset_decision_settings_from_the_runs_gate_policy():
    # Issue 35: `stopping:` held its own tolerance and metric beside the alias's policy, so the gate
    # refused every sequential run of smollm2-135m-recall (0.03 strict vs cpu-smoke's 0.15 flexible).
    from evalctl.config import load_config
    from evalctl.errors import BadInput
    from evalctl.execution.stopping import with_policy_settings

    sequential = {"stopping.mode": "sequential", "stopping.baseline": "base"}
    resolved = with_policy_settings(load_config(model="smollm2-135m-recall", overrides=sequential)).stopping
    assert (resolved.tolerance, resolved.alpha, resolved.metric, resolved.min_n) == (0.15, 0.05, "flexible", 30)
    own = with_policy_settings(load_config(model="smollm2-135m-recall", overrides={**sequential, "stopping.tolerance": 0.1}))
    assert (own.stopping.tolerance, own.stopping.metric) == (0.1, "flexible")  # the config's own value wins, field by field
    fixed = load_config(model="smollm2-135m-recall")
    assert with_policy_settings(fixed) is fixed
    with pytest.raises(BadInput, match="agreement"):
        with_policy_settings(load_config(model="tiny-hybrid-vllm", overrides=sequential))
