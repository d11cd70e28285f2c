from __future__ import annotations

import random
from pathlib import Path

import pytest
import yaml
from frames import manifest_for, sweep_frame

from evalctl.analysis.gate import GatePolicy, evaluate, load_policy
from evalctl.config_files import POLICY_FOLDER, find
from evalctl.errors import BadInput, ExitCode
from evalctl.runs import Run

POLICY = GatePolicy()


def gate(df, manifest=None, baseline=None, policy=POLICY):
    run = Run(Path("r"), manifest if manifest is not None else manifest_for(df), df)
    return evaluate(run, policy, baseline)


def cells(result, kind, status):
    return {(c.profile, c.variant, c.cache, c.shots, c.pass_index) for c in result.checks if c.kind == kind and c.status == status}


def test_flips_at_long_prompts_under_cache_on_are_a_regression_naming_those_cells_and_the_cliff():
    flipped = set(range(30))
    result = gate(sweep_frame(to_wrong={16: flipped, 20: flipped}))
    assert (result.verdict, result.exit_code) == ("regression", ExitCode.REGRESSION)
    assert cells(result, "accuracy", "regression") == {("cpu", "default", "on", 16, 1), ("cpu", "default", "on", 20, 1)}
    assert cells(result, "accuracy", "pass") == {("cpu", "default", "on", 8, 1)}
    regressions = {c.kind for c in result.checks if c.status == "regression"}
    assert regressions == {"accuracy"}  # the cliff is described, not judged
    prompt_cliff = result.cliffs[result.cliffs["column"] == "prompt_tokens"].iloc[0]
    assert prompt_cliff.bin_lo <= 150 * 16 < prompt_cliff.bin_hi and prompt_cliff.bin_lo > 150 * 8 + 49 - 64
    assert prompt_cliff.min_tokens == 150 * 16
    bad = [c for c in result.checks if c.kind == "accuracy" and c.status == "regression"]
    assert all(c.b == 30 and c.c == 0 and c.n == 200 and c.p_adjusted <= 0.05 for c in bad)


def test_two_random_flips_each_way_pass():
    rng = random.Random(7)
    to_wrong = {s: set(rng.sample(range(160), 2)) for s in (8, 16, 20)}
    to_right = {s: set(rng.sample(range(160, 200), 2)) for s in (8, 16, 20)}
    result = gate(sweep_frame(to_wrong=to_wrong, to_right=to_right))
    assert (result.verdict, result.exit_code) == ("pass", ExitCode.PASS), [c.reason for c in result.checks if c.status != "pass"]
    assert result.cliffs.empty


def test_ten_questions_with_a_twenty_point_drop_are_inconclusive_not_pass():
    df = sweep_frame(n=10, to_wrong={s: {0, 1} for s in (8, 16, 20)})
    result = gate(df)
    assert (result.verdict, result.exit_code) == ("inconclusive", ExitCode.INCONCLUSIVE)
    assert cells(result, "accuracy", "inconclusive") == {("cpu", "default", "on", s, 1) for s in (8, 16, 20)}
    # Even without the min_n floor, 10 pairs neither show the drop nor exclude a 3-point one.
    loose = [c for c in gate(df, policy=GatePolicy(min_n=1)).checks if c.kind == "accuracy"]
    assert {c.status for c in loose} == {"inconclusive"}
    assert all("cannot tell" in c.reason and "MDE" in c.reason for c in loose)


@pytest.mark.parametrize("how", ["status", "short cell", "missing cell"])
def test_incomplete_run_is_not_pass(how):
    df = sweep_frame()
    manifest = manifest_for(df)
    if how == "status":
        manifest.status = "interrupted"
    elif how == "short cell":
        df = df[~((df["cache"] == "on") & (df["shots"] == 20) & (df["doc_id"] >= 150))]
    else:  # a planned cell no record holds
        manifest.plan.append(manifest.plan[-1].model_copy(update={"shots": 24}))
    result = gate(df, manifest)
    assert result.exit_code != 0
    incomplete = [c for c in result.checks if c.kind == "completeness" and c.status != "pass"]
    assert incomplete and all("incomplete" in c.reason for c in incomplete)
    if how == "short cell":
        assert [(c.shots, c.cache, c.value, c.threshold) for c in incomplete] == [(20, "on", 150, 200)]


def test_baseline_run_comparison_per_cell():
    base = sweep_frame(run_id="base")
    cand = sweep_frame(run_id="cand", to_wrong={8: set(range(25))})
    result = gate(cand, baseline=Run(Path("base"), manifest_for(base), base))
    assert result.baseline == "base"
    run_regressions = {c.shots for c in result.checks if c.name == "run vs baseline" and c.status == "regression"}
    assert run_regressions == {8}


def test_error_and_invalid_rates_are_checked_per_cell():
    df = sweep_frame().astype({"strict_correct": object})
    hit = (df["cache"] == "on") & (df["shots"] == 8) & (df["doc_id"] < 10)
    df.loc[hit, ["error", "error_kind", "strict_correct", "strict_answer"]] = ["HTTP 500", "http_5xx", None, None]
    result = gate(df)
    bad = [c for c in result.checks if c.kind == "error_rate" and c.status == "regression"]
    assert [(c.cache, c.shots, c.value) for c in bad] == [("on", 8, 10 / 200)]


def test_default_policy_file_matches_the_model_and_bad_policies_name_the_field(tmp_path: Path):
    default = find("default", POLICY_FOLDER).path  # the packaged file documents the built-in
    assert load_policy(default) == GatePolicy() == load_policy()
    assert set(yaml.safe_load(default.read_text())) == set(GatePolicy.model_fields)
    bad = tmp_path / "gate.yaml"
    bad.write_text("max_accuracy_drop: 2\n")
    with pytest.raises(BadInput, match="max_accuracy_drop"):
        load_policy(bad)
    bad.write_text("maximum_drop: 0.1\n")
    with pytest.raises(BadInput, match="maximum_drop"):
        load_policy(bad)
    with pytest.raises(BadInput, match="cannot read"):
        load_policy(tmp_path / "missing.yaml")


def test_completeness_reads_the_recorded_plan_not_the_config():
    df = sweep_frame(n=40)
    manifest = manifest_for(df)
    manifest.config["servers"][0]["future_profile_field"] = 8192  # fields this version does not know, a value it cannot read:
    manifest.config["shots"] = "eight"  # the plan as recorded is what the run asked
    checks = [c for c in gate(df, manifest).checks if c.kind == "completeness"]
    assert [(c.status, c.reason) for c in checks] == [("pass", "all 6 planned cells have every question")]
    manifest.plan.pop()
    assert [c.reason for c in gate(df, manifest).checks if c.kind == "completeness"] == ["all 5 planned cells have every question"]
