"""`evalctl bisect` for real on CPU: 16 commits of a tiny "engine" repository, one of which breaks prefix recall.

The repository (made here, in tmp) holds `engine`, an executable the build's variant uses as
its interpreter (`--python "{worktree}/engine"`), and `engine.json`, which says how the commit
serves: `proxy` puts `evalctl canary` with a fault (`none`, or from the culprit on
`lost-prefix`) in front of one shared llama.cpp server (so a launch is a proxy start), `serve`
starts a real llama.cpp server of its own with another slot count (harmless nondeterminism).
One commit adds a file the build command refuses (its build fails). A nightly run of the bad
commit, gated against one of the good commit, says regression; `evalctl bisect --from-run` on
it is killed with -9 in the middle of a step and taken up with `--resume`. The same nightly
bisected over three listed builds with `--executor slurm` runs each step as a Slurm job.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import cpu_profile, evalctl, only_run, processes_of, skip_without_slurm, write_sweep_config

pytestmark = pytest.mark.server

RECORDS = 40  # questions a step may ask (looks at 10, 15, 23, 40); at 30 a lost prefix can end unknown at the last look
CULPRIT, BROKEN, HARMLESS = 11, 8, (9, 10)
COMMITS = 16  # after the good one

ENGINE = """#!{python}
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
spec = json.load(open(os.path.join(here, "engine.json")))
args = sys.argv[1:]  # .../llamacpp_main.py --model ... --port P ...
if spec["mode"] == "serve":
    args[args.index("--parallel") + 1] = str(spec["parallel"])
    os.execv(sys.executable, [sys.executable, *args])
port = args[args.index("--port") + 1]
canary = ["-m", "evalctl.cli", "canary", "--upstream", os.environ["BISECT_UPSTREAM"], "--fault", spec["fault"], "--port", port]
os.execv(sys.executable, [sys.executable, *canary])
"""


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout.strip()


def engine_repo(path: Path) -> list[str]:
    """The 17 builds' commits, good first: what each one changes is in its subject."""
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "engine").write_text(ENGINE.format(python=sys.executable))
    (path / "engine").chmod(0o755)
    spec = {"mode": "proxy", "fault": "none"}
    shas = []
    for i in range(COMMITS + 1):
        subject = f"Tidy the scheduler, part {i}"
        if i in HARMLESS:
            spec, subject = {"mode": "serve", "parallel": 3}, f"Serve with three slots ({i})"
        if i == CULPRIT:
            spec, subject = {"mode": "proxy", "fault": "lost-prefix"}, "Reuse cached prefix state"
        if i == BROKEN:
            (path / "BROKEN").write_text("the build refuses this commit\n")
            subject = "Half-finished refactor (does not build)"
        elif (path / "BROKEN").exists():
            (path / "BROKEN").unlink()
        (path / "engine.json").write_text(json.dumps(spec))
        (path / "NOTES").write_text(f"{i}\n")
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", subject)
        shas.append(git(path, "rev-parse", "HEAD"))
    return shas


def nightly(tmp: Path, repo: Path, sha: str, name: str, upstream: str, policy: Path) -> Path:
    """A nightly run of commit `sha` (its own checkout), as the from-run's history would hold it."""
    checkout = tmp / f"checkout-{name}"
    git(repo, "worktree", "add", "-q", "--detach", str(checkout), sha)
    cfg = write_sweep_config(
        tmp,
        None,
        [cpu_profile(context_length=2048, parallel=2, threads=1)],
        task="prefix-recall",
        shots=[RECORDS],
        limit=RECORDS,
        concurrency=2,
        generation={"max_tokens": 5},
        gate_policy=str(policy),
        stopping={"min_n": 10, "growth": 1.5},
        variants=[{"name": "nightly", "python": str(checkout / "engine"), "env": {"BISECT_UPSTREAM": upstream}}],
    )
    out = tmp / f"nightly-{name}"
    done = evalctl("sweep", "--config", str(cfg), "--output", str(out), timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    return only_run(out)


def kill_mid_step(argv: list[str], folder: Path, timeout: float = 900) -> None:
    """Start the bisect and kill -9 it once a step after the endpoints has written some records."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            state = folder / "bisect.json"
            steps = json.loads(state.read_text())["steps"] if state.exists() else []
            pending = [s for s in steps if s["verdict"] is None and s["number"] >= 2]
            if pending and any(len(p.read_text().splitlines()) >= 2 for p in Path(pending[0]["root"]).glob("*/records.jsonl")):
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return
            time.sleep(0.1)
        raise AssertionError(f"bisect ended before it could be killed: {proc.communicate()[0]}")
    finally:
        if proc.poll() is None:
            proc.kill()


@dataclass(frozen=True)
class Nightly:
    tmp: Path
    repo: Path
    shas: list[str]
    upstream: str
    bad_run: Path


@pytest.fixture(scope="module")
def nightly_regression(tmp_path_factory, cpu_server):
    """The engine repository, the session's llama.cpp server, and a nightly run of the bad commit gated as a regression."""
    tmp = tmp_path_factory.mktemp("bisect-cpu")
    repo = tmp / "engine-repo"
    shas = engine_repo(repo)
    policy = tmp / "policy.yaml"
    policy.write_text(yaml.safe_dump({"metric": "strict", "max_accuracy_drop": 0.15, "min_n": 10, "max_invalid_rate": 0.5}))
    good_run = nightly(tmp, repo, shas[0], "good", cpu_server, policy)
    bad_run = nightly(tmp, repo, shas[-1], "bad", cpu_server, policy)
    gated = evalctl("gate", str(bad_run), "--baseline", str(good_run))
    assert gated.returncode == 1, gated.stdout + gated.stderr  # the nightly says regression
    yield Nightly(tmp, repo, shas, cpu_server, bad_run)
    left = processes_of(tmp)
    for proc in left:
        proc.kill()
    assert not left, f"processes left behind: {[(p.pid, p.info.get('cmdline')) for p in left]}"


@pytest.mark.rotating(slice=1)  # slice 2 holds #20671 judged by hunt, slice 0 #24411
def test_bisect_names_the_culprit_skips_a_broken_build_and_resumes_after_kill_9(nightly_regression):
    world = nightly_regression
    shas, folder = world.shas, world.tmp / "bisect"
    argv = [
        sys.executable, "-m", "evalctl.cli", "bisect", "--from-run", str(world.bad_run),
        "--repo", str(world.repo), "--good", shas[0], "--bad", shas[-1],
        "--python", "{worktree}/engine", "--env", f"BISECT_UPSTREAM={world.upstream}",
        "--build", "test ! -e BROKEN", "--output", str(folder),
    ]  # fmt: skip
    kill_mid_step(argv, folder)
    before = json.loads((folder / "bisect.json").read_text())
    finished = {s["number"]: s for s in before["steps"] if s["verdict"] is not None}
    rows_before = {n: Path(s["run_dir"]).joinpath("records.jsonl").read_bytes() for n, s in finished.items() if s["run_dir"]}
    (interrupted,) = [s for s in before["steps"] if s["verdict"] is None]
    kept = (only_run(Path(interrupted["root"])) / "records.jsonl").read_text().splitlines()

    resumed = evalctl("bisect", "--resume", str(folder), timeout=1800)
    out = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, out
    state = json.loads((folder / "bisect.json").read_text())
    builds = state["builds"]

    # The culprit, named with its probability, within ceil(log2 n) + 3 launches after the endpoints.
    assert state["outcome"] == "culprit" and state["culprit"] == [CULPRIT], out
    assert state["probability"] >= 0.95
    assert builds[CULPRIT]["revision"] == shas[CULPRIT] and "Reuse cached prefix state" in out
    launched = [s for s in state["steps"] if s["launched"]]
    assert len(launched) - 2 <= math.ceil(math.log2(COMMITS)) + 3, state["steps"]
    print(
        f"culprit {CULPRIT} at p = {state['probability']:.3f} after {len(launched)} launches: "
        f"{[(s['build'], s['verdict']) for s in state['steps']]}"
    )

    # The broken commit was tried, skipped (never bad), and kept its build log; the harmless ones were judged good.
    verdicts = {s["build"]: s["verdict"] for s in state["steps"] if s["number"] > 0}
    assert builds[BROKEN]["built"] is False and verdicts.get(BROKEN) == "skipped"
    assert "exited 1" in Path(builds[BROKEN]["build_log"]).read_text()
    assert all(verdicts.get(h) in (None, "good") for h in HARMLESS) and any(h in verdicts for h in HARMLESS)
    assert all(v != "bad" for b, v in verdicts.items() if b < CULPRIT)

    # Killed with -9 mid-step and resumed: finished steps untouched, the interrupted one kept its rows and sent none twice.
    for number, rows in rows_before.items():
        assert Path(state["steps"][number]["run_dir"]).joinpath("records.jsonl").read_bytes() == rows
        assert state["steps"][number]["verdict"] == finished[number]["verdict"]
    taken_up = state["steps"][interrupted["number"]]
    records = pd.read_json(Path(taken_up["run_dir"]) / "records.jsonl", lines=True)
    assert records.duplicated(["doc_id", "prompt_hash"]).sum() == 0 and len(records) >= len(kept)
    assert not records.error.notna().any()

    # Every step is an ordinary run folder; the table, the plot and bisect.json are there.
    for step in launched:
        assert (Path(step["run_dir"]) / "gate.json").is_file() and (Path(step["run_dir"]) / "report.html").is_file()
    assert (folder / "bisect_accuracy.png").stat().st_size > 0
    assert "Bisect steps" in out and "culprit:" in out
    wide = [line for line in resumed.stdout.splitlines() if len(line) > 80]
    assert not wide, wide


# Nightly: the local bisect above proves the search; this one only adds that each step is a Slurm job.
@pytest.mark.rotating(slice=1)  # with the local bisect: they share its nightly-regression set-up
@pytest.mark.slurm
@skip_without_slurm
def test_bisect_on_slurm_runs_each_step_as_a_job(nightly_regression):
    world = nightly_regression
    listed = []
    for i in (0, 7, len(world.shas) - 1):  # good, a healthy proxy build, the bad build
        checkout = world.tmp / f"slurm-build-{i}"
        git(world.repo, "worktree", "add", "-q", "--detach", str(checkout), world.shas[i])
        listed.append({"name": f"commit-{i}", "python": str(checkout / "engine"), "git_revision": world.shas[i],
                       "env": {"BISECT_UPSTREAM": world.upstream}})  # fmt: skip
    builds = world.tmp / "builds.yaml"
    builds.write_text(yaml.safe_dump({"builds": listed}))
    folder = world.tmp / "bisect-slurm"
    done = evalctl(
        "bisect", "--from-run", str(world.bad_run), "--builds", str(builds), "--executor", "slurm", "-o", str(folder), timeout=1800
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    state = json.loads((folder / "bisect.json").read_text())
    assert state["outcome"] == "culprit" and state["culprit"] == [2] and f"culprit: {world.shas[-1][:10]}" in out
    assert [(s["build"], s["verdict"]) for s in state["steps"]] == [(0, "good"), (2, "bad"), (1, "good")]
    logs = list((folder / "slurm").glob("*_log.out"))
    assert len(logs) == 3, logs  # one Slurm job per step
