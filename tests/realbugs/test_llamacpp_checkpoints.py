"""Real regressions in released llama.cpp builds, caught by a conversation workload (docs/conversations.md).

llama.cpp #20532, fixed by PR #20671 ("server : fix ctx checkpoint invalidation", 2026-03-17):
when a request branched off the slot's history (an edit, or simply the next conversation: it shares
only the task's instruction, 22 tokens), the server erased only the context checkpoints whose
*first* position lay past the branch point. A checkpoint made before the prompt outgrew the SWA
cache (about 1,024 tokens: window 512 + batch 512) starts at position 0, so it survives every
later conversation; a restore takes the newest checkpoint starting below `n_past - 512` whatever
its end, and no checkpoint is made while the last one is less than 64 tokens behind. So when a
later conversation, grown a window past its first turn, regenerates that turn, the server
restores the *first conversation's* sliding-window state (seen in b8352's log:
`restored context checkpoint (pos_min = 0, pos_max = 1001, ...)` on every such regenerate).

Buggy: xllamacpp 0.2.14 (vendors llama.cpp b8352, before the fix; 0.2.13 vendors the same build).
Fixed: xllamacpp 2026.5.9294 (b9294). (2026.4.8672 dies with SIGILL on a CPU without AVX-512.)

llama.cpp PR #24411 ("server : skip checkpoints beyond pos_next", 2026-06-10), after PR #23981
("kv-cache : SWA checkpoints store only non-masked cells", 2026-06-01): from #23981 on, a
checkpoint holds only the last window of cells before its end, but the server still takes it to
hold everything from its `pos_min`, and still restores one that ends past the point a request
returns to. A checkpoint made before the prompt outgrew the SWA cache records `pos_min = 0`, so a
regenerate a few hundred tokens before its end restores it, and the SWA layers keep none of the
window before the regenerated turn (b9538's log: `restored context checkpoint (pos_min = 0,
pos_max = 980, ..., n_past = 446, ...)`). Buggy: xllamacpp 2026.6.9538 (b9538: #23981 in, #24411
not). Fixed: xllamacpp 2026.6.9713 (b9713). Its workload is #20671's in shorter turns.

Each build is served from a venv evalctl makes from the variant's `pip:` and caches; the model
comes from the index (`models.gemma_270m`). The case runs evalctl as a user would: a sweep with
the conversation workload, cache on and off and the A/A arm, then `evalctl gate --policy
agreement-floor` judging warm-vs-cold disagreement against the A/A floor: regression (exit 1) on
each buggy build, pass (exit 0) on each fixed one; by hand (`EVALCTL_REALBUGS=1`). In CI each case
is judged by `hunt` instead, with no workload written for it (the last test). Measured (docs/corpus.md): b8352 28 of 30
regenerates flipped, regression; b9294 none, pass; b9538 12 of 30, regression; b9713 none, pass;
6-7 min of one core a build.
Then `evalctl bisect --find fix` over six releases from the buggy run names the first fixed one
(opt-in, `EVALCTL_REALBUGS=1`: four more sweeps).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import evalctl, only_run
from models import gemma_270m

from evalctl.errors import ExitCode

pytestmark = [pytest.mark.server, pytest.mark.rotating]


# Thirty conversations on one slot, each of questions of 12 records in turns of 5-6 (a turn about 550-700
# tokens: Gemma's tokenizer makes about 1.6 characters a token of these made-up keys), grown past two SWA
# windows in two turns, then its first turn regenerated (a rewind a window back: the SWA cache no longer
# holds it). Only the regenerates are judged (`judge: returns`): one pair a conversation, independent as
# the floor check assumes, and the cold sides send 30 requests, not every turn. On b8352 every
# regenerate but the first conversation's restores the first conversation's stale checkpoint.
WORKLOAD = {
    "task": "prefix-recall",
    "fewshot": "sampled",
    "shots": [12],
    "limit": 40,
    "conversation": {
        "conversations": 30, "boundaries": [512], "grow_past": 2.0, "events": 1, "kinds": ["rewind"],
        "revisit": 0.0, "regrow": [0.1, 0.1], "turn_questions": [5, 6], "chars_per_token": 1.6, "judge": "returns",
    },
}  # fmt: skip
# llama.cpp PR #24411's: the same in turns of 2-3 questions (a first turn about 230-340 tokens), so that conversations
# pass through checkpoints that start at 0 and end below the SWA cache's 1,024 cells, and a return lands
# a few hundred tokens before the newest of them. On b9538 the return restores it (its cells: the last
# window before its end, so none of the window before the return) and 12 of 30 answers flip.
WORKLOAD_24411 = {**WORKLOAD, "conversation": {**WORKLOAD["conversation"], "turn_questions": [2, 3]}}


@dataclass(frozen=True)
class Build:
    name: str
    pip: str
    buggy: bool


B8352 = Build("b8352", "xllamacpp==0.2.14", buggy=True)  # llama.cpp #20532
B9294 = Build("b9294", "xllamacpp==2026.5.9294", buggy=False)  # its fix, PR #20671 (before PR #23981)
B9538 = Build("b9538", "xllamacpp==2026.6.9538", buggy=True)  # PR #23981 in, PR #24411 not
B9713 = Build("b9713", "xllamacpp==2026.6.9713", buggy=False)  # PR #24411


@dataclass(frozen=True)
class Case:
    """One released bug: the two builds as a release engineer signs one off against the other (the first the
    baseline), and the workload that reaches it."""

    name: str
    builds: tuple[Build, Build]
    workload: dict


# #20671 in release order: the candidate fixes what the baseline has (the baseline fails its own floor).
CASE_20671 = Case("20671", (B8352, B9294), WORKLOAD)
# #24411 as a sign-off catches a new bug: the candidate changes warm answers its baseline keeps (the differential).
CASE_24411 = Case("24411", (B9713, B9538), WORKLOAD_24411)

# One slot, so every conversation meets the checkpoints the earlier ones left.
SETTINGS = {"parallel": 1, "context_length": 4096, "threads": 1}
# The shipped policy (configs/gate/agreement-floor.yaml): warm-vs-cold disagreement against the A/A
# arm's cold-vs-cold floor with 10 points of margin (min_n 30).
POLICY = "agreement-floor"


def sweep_config(out: Path, builds: tuple[Build, ...], workload: dict) -> dict:
    return {
        "model": "gemma3-270m",
        **workload,
        "cache": ["on", "off"],
        "noise": True,
        "concurrency": 1,
        "side_by_side": 0,  # cache on and off at once, a core each (one thread a server): half the wall time on 2 cores
        "generation": {"max_tokens": 4, "stream": False},
        "output_dir": str(out),
        "servers": [{"name": "cpu", "engine": {"name": "llamacpp", **SETTINGS}, "model_path": str(gemma_270m())}],
        "variants": [{"name": build.name, "pip": [build.pip]} for build in builds],
    }


@dataclass(frozen=True)
class Swept:
    run: Path
    seconds: float


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """A sweep of some builds as the variants of one run, once for the module (the bisect starts from the buggy one's)."""
    done: dict[tuple[str, ...], Swept] = {}

    def sweep(builds: tuple[Build, ...], workload: dict) -> Swept:
        key = tuple(build.name for build in builds)
        if key not in done:
            tmp = tmp_path_factory.mktemp("-".join(key))
            cfg = tmp / "sweep.yaml"
            cfg.write_text(yaml.safe_dump(sweep_config(tmp / "out", builds, workload)))
            started = time.monotonic()
            out = evalctl("sweep", "--config", str(cfg), timeout=3600)
            assert out.returncode == 0, out.stderr + out.stdout
            done[key] = Swept(only_run(tmp / "out"), time.monotonic() - started)
        return done[key]

    return sweep


def judged(swept_run: Swept) -> tuple[ExitCode, dict, dict]:
    """The gate's exit and, by variant, its floor checks and its differential (a candidate's variant check, cache on)."""
    gate = evalctl("gate", str(swept_run.run), "--policy", POLICY)
    doc = json.loads((swept_run.run / "gate.json").read_text())
    df = pd.read_parquet(swept_run.run / "samples.parquet")
    for variant, rows in df.groupby("variant"):
        on, off = (rows[rows.cache == mode].set_index("doc_id").sort_index() for mode in ("on", "off"))
        flips = on[on.response != off.response.reindex(on.index)]
        print(f"\n{variant}: {len(on)} judged requests, {len(flips)} warm-vs-cold flips ({flips.turn_kind.value_counts().to_dict()})")
    floors = {c["variant"]: c for c in doc["checks"] if c["kind"] == "agreement-floor"}
    differential = {c["variant"]: c for c in doc["checks"] if c["kind"] == "accuracy" and (c["comparison"] or "").startswith("variant")}
    for check in [*floors.values(), *differential.values()]:
        print(f"{check['name']} {check['variant']}: {check['status']}: {check['reason']}")
    print(f"gate exit {gate.returncode}, sweep {swept_run.seconds:.0f} s")
    return ExitCode(gate.returncode), floors, differential


# By hand only (EVALCTL_REALBUGS=1): what no slice has room for.
OPT_IN = pytest.mark.skipif(os.environ.get("EVALCTL_REALBUGS") != "1", reason="set EVALCTL_REALBUGS=1: no slice has room for it")
# Two builds' sweep is about 14 min of one worker in CI: #20671's every rotation (slice 2); #24411's by hand.
CASES = [
    # by hand since hunt judges the case in slice 2, with no workload written for it: the two cost 25 min together
    pytest.param(CASE_20671, marks=[pytest.mark.rotating(slice=2), OPT_IN]),
    pytest.param(CASE_24411, marks=[pytest.mark.rotating(slice=1), OPT_IN]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_two_builds_in_one_sweep_the_buggy_one_is_a_regression_and_the_fixed_one_passes(swept, case):
    exit_code, floors, differential = judged(swept(case.builds, case.workload))
    assert exit_code == ExitCode.REGRESSION
    baseline, candidate = case.builds
    assert {name: c["status"] for name, c in floors.items()} == {b.name: "regression" if b.buggy else "pass" for b in case.builds}
    assert list(differential) == [candidate.name]  # the baseline is the reference, judged by its floor alone
    assert differential[candidate.name]["status"] == ("regression" if candidate.buggy else "pass")


# Each build as its own sweep (the form before builds were judged side by side): the same verdicts. By hand.
@pytest.mark.rotating(slice=1)
@OPT_IN
@pytest.mark.parametrize(
    ("build", "workload"),
    [pytest.param(build, case.workload, id=build.name) for case in (CASE_20671, CASE_24411) for build in case.builds],
)
def test_each_build_alone_is_judged_as_in_its_pair(swept, build, workload):
    exit_code, floors, _ = judged(swept((build,), workload))
    assert exit_code == (ExitCode.REGRESSION if build.buggy else ExitCode.PASS)
    assert [c["status"] for c in floors.values()] == ["regression" if build.buggy else "pass"]


# Six releases across the fix, oldest first (2026.4.8672 itself dies with SIGILL here; .1 runs).
RELEASES = "xllamacpp==0.2.13,0.2.14,2026.4.8672.1,2026.4.8929,2026.5.9093,2026.5.9294"
# The fix's own trace: its erase log line names pos_next ("erased invalidated context checkpoint
# ... pos_next = %d"); that string is in the binaries of 2026.4.8672 on, not in 0.2.13 or 0.2.14.
FIRST_FIXED = "2026.4.8672.1"


@pytest.mark.rotating(slice=2)
@OPT_IN
def test_llamacpp_20671_bisect_names_the_first_fixed_release(swept, tmp_path):
    """From the buggy build's run, gated by its own policy (the task's metric, cache on vs off), `evalctl bisect
    --find fix` over six releases names the first release whose warm answers are the fixed one's."""
    import shutil

    run = Path(shutil.copytree(swept((B8352,), WORKLOAD).run, tmp_path / "from-run"))
    gate = evalctl("gate", str(run))
    assert gate.returncode == ExitCode.REGRESSION, gate.stdout + gate.stderr
    started = time.monotonic()
    out = evalctl("bisect", "--from-run", str(run), "--builds", RELEASES, "--find", "fix", "-o", str(tmp_path / "b"), timeout=1800)
    state = json.loads((tmp_path / "b" / "bisect.json").read_text())
    steps = [(state["builds"][s["build"]]["name"], s["verdict"], s["answered"]) for s in state["steps"]]
    print(f"\n#20671 bisect: {steps}; {state['message']}; {time.monotonic() - started:.0f} s")
    assert out.returncode == 0, out.stdout + out.stderr
    assert [state["builds"][i]["name"] for i in state["culprit"]] == [FIRST_FIXED]


def hunt_config(out: Path, case: Case) -> dict:
    """Nothing but the model, the server and the two builds: no workload written for the bug (`--workload hunt`)."""
    return {
        "model": "gemma3-270m",
        "output_dir": str(out),
        "servers": [{"name": "cpu", "engine": {"name": "llamacpp", **SETTINGS}, "model_path": str(gemma_270m())}],
        "variants": [{"name": build.name, "pip": [build.pip]} for build in case.builds],
    }


# Issue 46: each case judged by `hunt` from one config of the model, the server and the two builds as variants: no workload
# written for its bug. #24411's in slice 0: b9538 a regression by the survey's divergence rung (299 s the pair). #20671's in
# slice 2: b8352's one return beyond the spread is a lead, and the hunt's follow-up (copies of that conversation up to it)
# makes b8352 a regression (433 s the pair with it). docs/corpus.md.
HUNT_CASES = [
    pytest.param(CASE_24411, marks=pytest.mark.rotating(slice=0)),
    pytest.param(CASE_20671, marks=pytest.mark.rotating(slice=2)),
]


@pytest.mark.parametrize("case", HUNT_CASES, ids=lambda c: c.name)
def test_hunt_judges_both_builds_with_no_workload_written_for_the_bug(tmp_path, case):
    cfg = tmp_path / "sweep.yaml"
    cfg.write_text(yaml.safe_dump(hunt_config(tmp_path / "out", case)))
    started = time.monotonic()
    out = evalctl("sweep", "--config", str(cfg), "--workload", "hunt", timeout=3600)
    assert out.returncode == 0, out.stderr + out.stdout
    run = only_run(tmp_path / "out")
    gate = evalctl("gate", str(run))  # the policy hunt recorded: the answer rung (agreement), with the exact and divergence rungs
    doc = json.loads((run / "gate.json").read_text())
    # the divergence rung, and where it left a build undecided, the follow-up of its leads (in the hunt's folder)
    rungs = {(c["variant"], c["kind"]): (c["status"], c["b"], c["n"]) for c in doc["checks"] if c["kind"] in ("divergence", "follow-up")}
    print(f"\nhunt {case.name}: gate exit {gate.returncode}, rungs {rungs}, {time.monotonic() - started:.0f} s")
    assert gate.returncode == ExitCode.REGRESSION, gate.stdout
    verdicts = {b.name: {status for (variant, _), (status, _, _) in rungs.items() if variant == b.name} for b in case.builds}
    assert {name: "regression" in found for name, found in verdicts.items()} == {b.name: b.buggy for b in case.builds}
    fixed = next(b.name for b in case.builds if not b.buggy)
    own = [c for c in doc["checks"] if c["variant"] == fixed]
    # the fixed build's rungs pass; nothing of it is a regression (its speeds may be withheld: the host's load varies)
    rung_checks = [
        c for c in own if c["kind"] in ("exact", "divergence") or c["comparison"] == "cache on vs off" and c["kind"] == "accuracy"
    ]
    # a divergence finding its follow-up cleared is a warning
    found = [(c["kind"], c["status"], c["reason"]) for c in rung_checks]
    assert len(rung_checks) == 2 and {c["status"] for c in rung_checks} <= {"pass", "warning"}, found
    assert not [c for c in own if c["status"] == "regression"], [(c["kind"], c["reason"]) for c in own if c["status"] == "regression"]
