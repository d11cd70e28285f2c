"""Leads (`analysis.leads`): the returns beyond the healthy spread of a build the divergence rung could not yet call, and
`evalctl sweep --follow RUN`'s config of copies of their conversations (no server)."""

from __future__ import annotations

import json

import pytest
from test_divergence import N, run_with
from test_gate_cli import cli, write_run

from evalctl.analysis.divergence import Settings
from evalctl.analysis.leads import leads
from evalctl.errors import BadInput, ExitCode
from evalctl.follow import follow_config
from evalctl.schema import Lead

ALPHA = 0.05


def test_the_returns_beyond_the_spread_of_an_undecided_build_are_its_leads_worst_first():
    # run_with: returns are docs 0..N-1 of conversation doc % 10, so doc 15 is conversation 5's second return
    assert leads(run_with({15: 0.5}, extend_shift=0.07).samples, Settings(), ALPHA) == {"default": [Lead(conversation=5, ret=1)]}
    three = run_with({15: 0.5, 22: 0.9, 7: 0.3}, extend_shift=0.07).samples  # 3 of 40 against 40: undecided
    assert leads(three, Settings(), ALPHA) == {"default": [Lead(conversation=2, ret=2), Lead(conversation=5, ret=1)]}


def test_a_build_with_no_return_beyond_or_already_a_regression_has_none():
    assert leads(run_with({}, extend_shift=0.07).samples, Settings(), ALPHA) == {}
    assert leads(run_with({d: 0.5 for d in range(0, N, 4)}, extend_shift=0.07).samples, Settings(), ALPHA) == {}


def hunt_run(tmp_path, shifts: dict[int, float]):
    folder = write_run(tmp_path, "hunt", run_with(shifts, extend_shift=0.07).samples)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["config"].update(workload="hunt", hunt={"boundaries": {"swa_window": 512}, "slots": 1, "seed": 7})
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def test_a_follow_up_is_the_hunt_again_as_copies_of_its_leads(tmp_path):
    folder = hunt_run(tmp_path, {15: 0.5})
    out = cli("gate", str(folder))
    assert out.exit_code == ExitCode.INCONCLUSIVE and f"next: evalctl sweep --follow {folder}" in out.output
    (check,) = [c for c in json.loads((folder / "gate.json").read_text())["checks"] if c["kind"] == "divergence"]
    assert "evalctl sweep --follow RUN" in check["reason"]  # the gate names the way on
    config = follow_config(folder, {"hunt.copies": 3})
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["config"]["hunt"]["follow"] = [{"conversation": 5, "ret": 1}]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BadInput, match="is a follow-up already"):
        follow_config(folder)
    assert config.workload == "hunt" and config.hunt.seed == 7 and config.hunt.copies == 3
    assert config.hunt.follow == [Lead(conversation=5, ret=1)]


def test_following_what_has_no_lead_is_bad_input_that_says_why(tmp_path):
    with pytest.raises(BadInput, match="no lead to follow"):
        follow_config(hunt_run(tmp_path, {}))
    plain = write_run(tmp_path, "plain", run_with({15: 0.5}).samples)
    out = cli("sweep", "--follow", str(plain))
    assert out.exit_code == ExitCode.BAD_INPUT and "is no hunt" in out.output
    for other in (("--model", "m"), ("--url", "http://127.0.0.1:9"), ("--resume", str(plain))):
        out = cli("sweep", "--follow", str(plain), *other)
        assert out.exit_code == ExitCode.BAD_INPUT and "takes its config from the run it follows" in out.output
