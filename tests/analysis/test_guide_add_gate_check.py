"""docs/guide-add-gate-check.md, step by step: the guide's example check written as one new module
(a plug-in named by its `evalctl.checks` entry point), its policy section, and the gate running it with
the built-in checks; no evalctl module edited."""

from __future__ import annotations

import json
from pathlib import Path

import guides
import pytest
import yaml
from frames import manifest_for, sweep_frame

from evalctl.analysis import checks as registry
from evalctl.analysis.gate import GatePolicy, evaluate, load_policy
from evalctl.errors import BadInput
from evalctl.report.gate_outputs import write_gate_outputs
from evalctl.runs import Run


def guide_block(language: str, index: int = 0) -> str:
    return guides.guide_block("guide-add-gate-check.md", language, index)


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch):
    """The guide's module and entry point, installed on sys.path; the registry left as it was afterwards."""
    guides.plugged_in(monkeypatch, tmp_path / "site", "guide-add-gate-check.md", registry.CHECKS)


def run_with_empty_answers(empty: int) -> Run:
    df = sweep_frame(n=60, shots=(8,))
    cell = (df["cache"] == "on") & (df["doc_id"] < empty)
    df.loc[cell, "response"] = ""
    return Run(Path("r"), manifest_for(df), df)


def test_the_guides_check_runs_with_the_built_ins_and_reads_its_policy_section(plugin, tmp_path: Path):
    assert "empty-answers" in [c.kind for c in registry.registered_checks()]
    run = run_with_empty_answers(empty=5)  # 5 of 60 cache-on answers empty: 8.3%
    default = [c for c in evaluate(run, GatePolicy()).checks if c.kind == "empty-answers"]
    assert {(c.cache, c.status) for c in default} == {("on", "regression"), ("off", "pass")}  # default max 5%
    on = next(c for c in default if c.cache == "on")
    assert on.reason == "8.3% of 60 answers empty (max 5.0%)" and on.value == pytest.approx(5 / 60)

    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(guide_block("yaml"))
    policy = load_policy(policy_file)
    result = evaluate(run, policy)
    mine = [c for c in result.checks if c.kind == "empty-answers"]
    assert {c.status for c in mine} == {"pass"} and {c.threshold for c in mine} == {0.10}
    write_gate_outputs(result, tmp_path / "gate")
    written = json.loads((tmp_path / "gate" / "gate.json").read_text())
    assert sum(c["kind"] == "empty-answers" for c in written["checks"]) == 2


def test_a_bad_or_unknown_policy_section_is_a_policy_error(plugin, tmp_path: Path):
    run = run_with_empty_answers(empty=0)
    with pytest.raises(BadInput, match="checks.empty-answers: max_rate"):
        evaluate(run, GatePolicy(checks={"empty-answers": {"max_rate": 2}}))
    with pytest.raises(BadInput, match="unknown check 'emptyy'.*known: .*empty-answers"):
        evaluate(run, GatePolicy.model_validate(yaml.safe_load("checks: {emptyy: {}}")))


def test_without_the_plugin_the_gate_has_only_its_own_checks():
    assert "empty-answers" not in [c.kind for c in registry.registered_checks()]
