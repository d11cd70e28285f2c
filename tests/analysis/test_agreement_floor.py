"""Agreement judged against the A/A arm's cold-vs-cold floor (`analysis.floor`, policy `agreement_floor: aa`).

40 questions, as tried on a real model: a good build's warm answers differed from the cold ones
on 2 of them. The floor check must pass a warm cell that differs no more than the cold replica
does, find a regression where the warm cell differs on 12, and never pass without the arm.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from frames import manifest_for, sample_frame

from evalctl.analysis.gate import GatePolicy, evaluate
from evalctl.analysis.gate_policy import FloorSource, load_policy
from evalctl.errors import BadInput
from evalctl.runs import Run

N = 40
FLOOR = GatePolicy(
    metric="agreement", agreement_floor=FloorSource.aa, max_throughput_drop=None, max_first_attempt_failure_increase=0.10
)  # as configs/gate/agreement-floor.yaml


def run_with(warm_differ: set[int], replica_differ: set[int] | None, shots: tuple[int, ...] = (8,)) -> Run:
    """Cache off and on over N questions at each shot count; the warm answers differ from the cold ones on `warm_differ`
    (every shot count), and the A/A replica of the cache-off cells on `replica_differ` (None: no arm)."""
    rows = [
        dict(cache=cache, shots=s, doc_id=doc, prompt_hash=f"{s}-{doc}",
             response=f"#### {doc}" + (" (warm)" if cache == "on" and doc in warm_differ else ""))
        for cache in ("off", "on")
        for s in shots
        for doc in range(N)
    ]  # fmt: skip
    samples = sample_frame(rows)
    replica = samples.iloc[:0]
    if replica_differ is not None:
        cold = samples[samples["cache"] == "off"]
        replica = cold.assign(response=[r + (" (again)" if d in replica_differ else "") for r, d in zip(cold["response"], cold["doc_id"])])
    return Run(Path("r"), manifest_for(samples), samples, replica)


def floor_checks(run: Run, policy: GatePolicy = FLOOR):
    result = evaluate(run, policy)
    return result, [c for c in result.checks if c.kind == "agreement-floor"]


def test_a_warm_cell_that_differs_on_the_floors_two_questions_passes():
    # The fragile questions: the same two differ warm and cold-vs-cold; the fixed 0.15 rule cannot pass 2/40 here.
    result, (check,) = floor_checks(run_with(warm_differ={3, 17}, replica_differ={3, 17}))
    assert (check.status, check.b, check.c, check.n) == ("pass", 0, 0, N), check.reason
    assert "5.0%" in check.reason and check.family == "agreement-floor default" and check.comparison == "cache on vs off"
    assert result.verdict == "pass"
    assert not [c for c in result.checks if c.comparison == "cache on vs off" and c.kind == "accuracy"]  # judged by the floor instead
    # The fixed tolerance alone cannot pass the same cell: 2 of 40 against none leaves the drop's bound above 0.15.
    fixed = evaluate(run_with(warm_differ={3, 17}, replica_differ={3, 17}), GatePolicy(metric="agreement", max_accuracy_drop=0.15))
    (accuracy,) = [c for c in fixed.checks if c.kind == "accuracy"]
    assert (accuracy.status, accuracy.b) == ("inconclusive", 2)


def test_twelve_warm_disagreements_over_a_floor_of_two_are_a_regression():
    result, (check,) = floor_checks(run_with(warm_differ={3, 17, *range(20, 30)}, replica_differ={3, 17}))
    assert (check.status, check.b, check.c) == ("regression", 10, 0), check.reason
    assert "30.0%" in check.reason and "5.0%" in check.reason
    assert result.verdict == "regression"


def test_disjoint_disagreements_at_the_smaller_margin_are_still_a_regression():
    # The warm twelve and the floor's two on different questions (b = 12, c = 2): the most the replica's flips can hide.
    policy = FLOOR.model_copy(update={"floor_margin": 0.05})
    _, (check,) = floor_checks(run_with(warm_differ=set(range(20, 32)), replica_differ={3, 17}), policy)
    assert (check.status, check.b, check.c) == ("regression", 12, 2), check.reason


@pytest.mark.parametrize("warm", [{3, 17}, set(range(12))])
def test_without_the_a_a_arm_the_floor_check_is_inconclusive_and_says_to_enable_it(warm):
    result, checks = floor_checks(run_with(warm_differ=warm, replica_differ=None))
    assert [(c.status, c.cache, c.shots) for c in checks] == [("inconclusive", "on", 8)]
    assert "noise: true" in checks[0].reason
    assert result.verdict in {"inconclusive", "regression"}  # never a pass on the fixed tolerance alone


def test_every_shot_count_has_its_replica_and_a_cell_without_one_is_inconclusive_not_left_out():
    _, checks = floor_checks(run_with(warm_differ=set(), replica_differ=set(), shots=(8, 16)))
    assert [(c.shots, c.status) for c in checks] == [(8, "pass"), (16, "pass")]
    # A run whose arm stopped after its first cell (or one from before every cell had its replica).
    run = run_with(warm_differ=set(), replica_differ=set(), shots=(8, 16))
    _, checks = floor_checks(Run(run.path, run.manifest, run.samples, run.noise[run.noise["shots"] == 8]))
    by_shots = {c.shots: c for c in checks}
    assert by_shots[8].status == "pass" and by_shots[16].status == "inconclusive"
    assert "arm failed or stopped" in by_shots[16].reason


def run_builds(warm_differ: dict[str, set[int]], replica_differ: dict[str, set[int]] | None = None) -> Run:
    """Two or more builds (variants, the first the baseline) of one sweep on the same N prompts: each build's
    warm answers differ from its own cold ones on `warm_differ[build]`, its A/A replica on `replica_differ[build]`."""
    runs = {name: run_with(differ, (replica_differ or {}).get(name, set())) for name, differ in warm_differ.items()}
    samples = pd.concat([run.samples.assign(variant=name) for name, run in runs.items()], ignore_index=True)
    noise = pd.concat([run.noise.assign(variant=name) for name, run in runs.items()], ignore_index=True)
    return Run(Path("r"), manifest_for(samples), samples, noise)


def differential_checks(result) -> list:
    return [c for c in result.checks if c.kind == "accuracy" and c.comparison and c.comparison.startswith("variant")]


BUGGY = set(range(9))  # llama.cpp #24411's b9538 in the two-build sweep: 9 of 40 returns flipped, its fix none


def test_a_candidate_build_that_changes_nine_warm_answers_its_baseline_does_not_is_a_regression():
    result = evaluate(run_builds({"fixed": set(), "buggy": BUGGY}), FLOOR)
    (diff,) = differential_checks(result)
    assert (diff.variant, diff.cache, diff.status, diff.b, diff.c, diff.n) == ("buggy", "on", "regression", 9, 0, N), diff.reason
    assert diff.threshold == FLOOR.floor_margin and "9 changed by this build only" in diff.reason and "22.5%" in diff.reason
    floors = {c.variant: c for c in result.checks if c.kind == "agreement-floor"}
    assert {v: (c.status, c.b) for v, c in floors.items()} == {"fixed": ("pass", 0), "buggy": ("regression", 9)}
    assert result.verdict == "regression"
    # The variant's cache-off cells judge nothing under agreement (each build's cold answers are its own reference).
    assert not [c for c in result.checks if c.kind == "accuracy" and c.cache == "off"]


def test_the_same_builds_in_the_other_order_the_buggy_baseline_fails_its_own_floor_and_the_fixed_candidate_passes():
    """9 of 40 over a floor of 0 is p 0.040 beyond the 0.10 margin. Each build's floor checks are their own Holm
    family, so the buggy build gets the verdict it gets alone, whichever side of the comparison it is on."""
    result = evaluate(run_builds({"buggy": BUGGY, "fixed": set()}), FLOOR)
    (diff,) = differential_checks(result)
    assert (diff.variant, diff.status, diff.b, diff.c) == ("fixed", "pass", 0, 9), diff.reason
    floors = {c.variant: c for c in result.checks if c.kind == "agreement-floor"}
    assert {v: c.status for v, c in floors.items()} == {"buggy": "regression", "fixed": "pass"}, floors["buggy"].reason
    assert floors["buggy"].family == "agreement-floor buggy" and result.verdict == "regression"
    alone = evaluate(run_builds({"buggy": BUGGY}), FLOOR)
    (floor,) = [c for c in alone.checks if c.kind == "agreement-floor"]
    assert (floor.status, floor.p_adjusted) == ("regression", pytest.approx(floors["buggy"].p_adjusted))


def test_two_cells_of_one_build_share_its_family_and_an_inconclusive_interval_beyond_the_margin_names_holm():
    run = run_with(warm_differ=BUGGY, replica_differ=set(), shots=(8, 16))
    _, checks = floor_checks(run)
    assert [c.status for c in checks] == ["inconclusive", "inconclusive"]
    assert "not after Holm over 2 checks" in checks[0].reason


def test_two_healthy_builds_that_flip_the_same_fragile_answers_pass():
    result = evaluate(run_builds({"a": {3, 17}, "b": {3, 17}}, {"a": {3, 17}, "b": {3, 17}}), FLOOR)
    assert [c.status for c in differential_checks(result)] == ["pass"]
    assert result.verdict == "pass", [(c.name, c.status, c.reason) for c in result.checks if c.status != "pass"]


def test_a_warm_request_error_counts_as_a_disagreement():
    run = run_with(warm_differ=set(), replica_differ=set())
    warm = (run.samples["cache"] == "on") & (run.samples["doc_id"] < 12)
    run.samples.loc[warm, ["response", "error", "error_kind"]] = [None, "server died", "server_died"]
    _, (check,) = floor_checks(run)
    assert (check.status, check.b) == ("regression", 12)


def test_the_verdict_line_states_the_margin():
    from evalctl.report.terminal import tolerance_note

    assert "A/A floor 0.10" in tolerance_note(FLOOR) and "floor" not in tolerance_note(GatePolicy())


def test_the_floor_check_is_off_unless_the_policy_asks_and_reads_from_yaml(tmp_path):
    _, checks = floor_checks(run_with(warm_differ=set(range(12)), replica_differ=set()), GatePolicy())
    assert checks == []
    path = tmp_path / "p.yaml"
    path.write_text("agreement_floor: aa\nfloor_margin: 0.05\n")
    assert load_policy(path).agreement_floor is FloorSource.aa and load_policy(path).floor_margin == 0.05
    path.write_text("agreement_floor: bb\n")
    with pytest.raises(BadInput, match="agreement_floor"):
        load_policy(path)


def _exact_floor():
    import importlib.util
    import sys

    scripts = Path(__file__).resolve().parents[2] / "scripts"
    sys.path.insert(0, str(scripts))  # it imports exact_gate beside it, as when run as a script
    try:
        spec = importlib.util.spec_from_file_location("exact_floor", scripts / "exact_floor.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(scripts))
    return module


@pytest.mark.parametrize(("n", "floor", "bug", "margin"), [(40, 0.05, 0.2, 0.10), (60, 0.0, 0.1, 0.05), (50, 0.10, 0.0, 0.10)])
def test_the_proof_scripts_exact_rates_are_the_gates_decisions_summed_over_every_count(n, floor, bug, margin):
    """scripts/exact_floor.py's figures, against the gate's own decide_drops on every (b, c) weighted by the trinomial law."""
    from scipy.stats import multinomial

    from evalctl.analysis.drop_rule import decide_drops

    script = _exact_floor()
    warm = script.warm_rate(floor, bug)
    p_b, p_c = warm * (1 - floor), (1 - warm) * floor
    b, c = (a.ravel() for a in np.meshgrid(np.arange(n + 1), np.arange(n + 1)))
    possible = b + c <= n
    b, c = b[possible], c[possible]
    weight = multinomial.pmf(np.stack([b, c, n - b - c], axis=1), n, [p_b, p_c, 1 - p_b - p_c])
    status = np.array([decide_drops([x], [y], [n], margin, 0.05).status[0] for x, y in zip(b, c)])
    regression, passed = script.floor_rates(n, floor, bug, margin, 0.05)
    # The script sums c within 7 standard deviations of its mean (exact_gate.window): ~1e-7 left out at these n.
    assert regression == pytest.approx(weight[status == "regression"].sum(), abs=1e-6)
    assert passed == pytest.approx(weight[status == "pass"].sum(), abs=1e-6)
    assert 0 < regression + passed <= 1
