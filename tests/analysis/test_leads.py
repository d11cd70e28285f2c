"""Leads (`analysis.leads`): the returns beyond the healthy spread of a build the divergence rung could not yet call, and
`evalctl sweep --follow RUN`'s config of copies of their conversations, and the follow-up's verdict in the hunt's gate
(no server)."""

from __future__ import annotations

import json

import pytest
from test_divergence import N, run_with
from test_gate_cli import cli, write_run

from evalctl.analysis.divergence import Settings
from evalctl.analysis.leads import leads
from evalctl.errors import BadInput, ExitCode
from evalctl.follow import follow_config
from evalctl.runs import FOLLOW_UP_DIR, load_run
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
    config = follow_config(load_run(folder), {"hunt.copies": 3})
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["config"]["hunt"]["follow"] = [{"conversation": 5, "ret": 1}]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BadInput, match="is a follow-up already"):
        follow_config(load_run(folder))
    out = cli("gate", str(folder))  # a follow-up judged alone: undecided, and it names no follow-up of itself
    assert out.exit_code == ExitCode.INCONCLUSIVE and "next:" not in out.output and "--follow" not in out.output
    assert config.workload == "hunt" and config.hunt.seed == 7 and config.hunt.copies == 3
    assert config.output_dir == folder / FOLLOW_UP_DIR  # inside the hunt's folder, where its gate finds it
    assert config.hunt.follow == [Lead(conversation=5, ret=1)]


def test_following_what_has_no_lead_is_bad_input_that_says_why(tmp_path):
    healthy = hunt_run(tmp_path, {})
    assert follow_config(load_run(healthy)) is None
    out = cli("sweep", "--follow", str(healthy))
    assert out.exit_code == ExitCode.BAD_INPUT and "no lead to follow" in out.output
    plain = write_run(tmp_path, "plain", run_with({15: 0.5}).samples)
    out = cli("sweep", "--follow", str(plain))
    assert out.exit_code == ExitCode.BAD_INPUT and "is no hunt" in out.output
    for other in (("--model", "m"), ("--url", "http://127.0.0.1:9"), ("--resume", str(plain))):
        out = cli("sweep", "--follow", str(plain), *other)
        assert out.exit_code == ExitCode.BAD_INPUT and "takes its config from the run it follows" in out.output


@pytest.mark.parametrize(
    ("copies", "verdict", "divergence"),
    # healthy copies: what stays undecided is the answer rung alone (no answer moved, but 80 pairs cannot show a drop
    # under the default policy's 0.03)
    [({d: 0.5 for d in range(0, N, 2)}, ExitCode.REGRESSION, "inconclusive"), ({}, ExitCode.INCONCLUSIVE, "warning")],
    ids=["copies-drift", "copies-healthy"],
)
def test_the_hunts_gate_reads_its_follow_up(tmp_path, copies, verdict, divergence):
    """The follow-up in the hunt's folder decides what the hunt left undecided: its regression is the build's; its pass,
    every return beyond followed, turns the undecided finding into a warning. An unfinished one decides nothing."""
    folder = hunt_run(tmp_path, {15: 0.5})
    (folder / FOLLOW_UP_DIR).mkdir()
    follow = write_run(folder / FOLLOW_UP_DIR, "f", run_with(copies, extend_shift=0.07).samples, status="interrupted")
    out = cli("gate", str(folder))
    checks = json.loads((folder / "gate.json").read_text())["checks"]
    assert out.exit_code == ExitCode.INCONCLUSIVE and "next:" not in out.output
    assert [(c["status"], f"--resume {follow}" in c["reason"]) for c in checks if c["kind"] == "follow-up"] == [("inconclusive", True)]
    manifest = json.loads((follow / "manifest.json").read_text())
    (follow / "manifest.json").write_text(json.dumps({**manifest, "status": "complete"}))
    out = cli("gate", str(folder))
    found = json.loads((folder / "gate.json").read_text())["checks"]
    checks = {c["kind"]: c for c in found}
    assert out.exit_code == verdict, out.output
    assert {c["kind"] for c in found if c["status"] == "inconclusive"} == ({"accuracy", "divergence"} if copies else {"accuracy"})
    assert checks["divergence"]["status"] == divergence and "--follow" not in checks["divergence"]["reason"]
    assert checks["follow-up"]["status"] == ("regression" if copies else "pass") and checks["follow-up"]["n"] == N


def test_a_cleared_build_s_moved_answers_within_the_follow_ups_spread_are_near_ties(tmp_path):
    """The ladder as where the rung passes: a return just beyond the survey's spread (0.2 nats against 0.17) flipped its
    answer; its copies stayed within theirs (0.25), and so did it: the undecided answer comparison is a warning."""
    folder = write_run(tmp_path, "hunt", run_with({15: 0.2}, extend_shift=0.07, flipped=frozenset({15})).samples)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["config"].update(workload="hunt", hunt={"boundaries": {"swa_window": 512}, "slots": 1, "seed": 7})
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / FOLLOW_UP_DIR).mkdir()
    write_run(folder / FOLLOW_UP_DIR, "f", run_with({}, extend_shift=0.15).samples)
    cli("gate", str(folder))
    checks = json.loads((folder / "gate.json").read_text())["checks"]
    answers = [c for c in checks if c["kind"] == "accuracy" and c["comparison"] == "cache on vs off"]
    assert [c["status"] for c in answers] == ["warning"] and "the follow-up cleared" in answers[0]["reason"]
    # beyond the follow-up's spread too: not a near tie, the answer rung keeps its finding
    folder = write_run(tmp_path, "hunt2", run_with({15: 0.4}, extend_shift=0.07, flipped=frozenset({15})).samples)
    (folder / "manifest.json").write_text(json.dumps({**manifest, "run_id": "hunt2"}))
    (folder / FOLLOW_UP_DIR).mkdir()
    write_run(folder / FOLLOW_UP_DIR, "f", run_with({}, extend_shift=0.15).samples)
    cli("gate", str(folder))
    checks = json.loads((folder / "gate.json").read_text())["checks"]
    assert [c["status"] for c in checks if c["kind"] == "accuracy" and c["comparison"] == "cache on vs off"] == ["inconclusive"]
