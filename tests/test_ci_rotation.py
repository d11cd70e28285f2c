"""The suite's own machinery: the rotating tier's two halves (which slice a test is in,
conftest.rotation_slice, and which slice a CI run takes, .ci/rotation.sh, on a real git
history), each slice's time from a JUnit report, and the units two xdist workers share."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROTATION_SLICES, rotation_slice

REPO = Path(__file__).resolve().parents[1]
PICK = REPO / ".ci" / "rotation.sh"


class Item:
    """What rotation_slice reads of a pytest item."""

    def __init__(self, nodeid: str, marker: pytest.Mark | None) -> None:
        self.nodeid, self.marker = nodeid, marker

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        return self.marker if name == "rotating" else None


def test_a_test_is_in_its_pinned_slice_else_one_fixed_by_its_id():
    assert rotation_slice(Item("tests/x.py::test_a", None)) is None
    assert rotation_slice(Item("tests/x.py::test_a", pytest.mark.rotating(slice=2).mark)) == 2
    hashed = [rotation_slice(Item(f"tests/x.py::test_{i}", pytest.mark.rotating.mark)) for i in range(60)]
    assert hashed == [rotation_slice(Item(f"tests/x.py::test_{i}", pytest.mark.rotating.mark)) for i in range(60)]
    assert set(hashed) == set(range(ROTATION_SLICES))  # 60 ids reach every slice


@pytest.fixture
def history(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "EVALCTL_CI_ROTATION_LOG": str(tmp_path / "ci-rotation.log"), "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    env = {k: v for k, v in env.items() if k not in ("EVALCTL_CI_FULL", "EVALCTL_CI_SLICE")}

    def run(*argv: str, **extra: str) -> str:
        done = subprocess.run(argv, cwd=repo, env={**env, **extra}, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def commit(n: int = 1) -> None:
        for _ in range(n):
            run("git", "commit", "-q", "--allow-empty", "-m", "c")

    def pick(**extra: str) -> str:
        return run("bash", str(PICK), "pick", **extra).split("\t")[0]

    run("git", "init", "-q")
    commit()
    return run, commit, pick


def test_each_green_submission_takes_the_next_slice_however_many_commits_it_adds(history):
    run, commit, pick = history
    first = pick()  # nothing recorded: the commit count mod 3
    assert first == str(1 % ROTATION_SLICES)
    run("bash", str(PICK), "passed", first)
    assert pick() == first  # the same commit again: the same slice
    seen = [int(first)]
    for added in (3, 1, 6, 2, 3):  # a count mod 3 would repeat a slice on 3 and 6
        commit(added)
        slice_ = pick()
        assert int(slice_) == (seen[-1] + 1) % ROTATION_SLICES
        run("bash", str(PICK), "passed", slice_)
        seen.append(int(slice_))
    for start in range(len(seen) - 2):  # every window of three green submissions holds every slice
        assert set(seen[start : start + 3]) == set(range(ROTATION_SLICES))


def test_a_red_run_records_nothing_so_the_next_run_retries_its_slice(history):
    run, commit, pick = history
    run("bash", str(PICK), "passed", pick())
    commit()
    red = pick()  # this run fails: nothing is recorded
    commit()
    assert pick() == red


def test_full_and_forced_slices(history):
    run, commit, pick = history
    assert pick(EVALCTL_CI_FULL="1") == "all"
    assert pick(EVALCTL_CI_SLICE="2") == "2"
    run("bash", str(PICK), "passed", "all")  # a full run leaves the rotation where it was
    assert pick() == str(1 % ROTATION_SLICES)


def nested_pytest(tmp_path: Path, tests: str, *args: str) -> subprocess.CompletedProcess:
    """A real pytest run, under the suite's own conftest.py, of the test module `tests`: green, or the test fails."""
    (tmp_path / "conftest.py").write_text((REPO / "tests" / "conftest.py").read_text())
    (tmp_path / "test_t.py").write_text(tests)
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args, str(tmp_path)]
    run = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO / "tests")})
    assert run.returncode == 0, run.stdout + run.stderr
    return run


def test_a_full_runs_report_gives_each_slices_time_beside_the_every_run_tests(tmp_path):
    """A real pytest run with --rotation all writes each rotating test's slice into its JUnit
    report, and scripts/ci_times.py totals the tiers from it."""
    report = tmp_path / "junit.xml"
    tests = (
        "import time, pytest\n"
        "def test_every():\n    time.sleep(0.2)\n"
        "@pytest.mark.rotating(slice=1)\ndef test_one():\n    time.sleep(0.4)\n"
        "@pytest.mark.rotating(slice=2)\ndef test_two():\n    time.sleep(0.6)\n"
    )
    nested_pytest(tmp_path, tests, "-q", "--rotation", "all", f"--junitxml={report}")
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        from ci_times import tier_times
    finally:
        sys.path.remove(str(REPO / "scripts"))
    tiers = tier_times(report)
    assert set(tiers) == {"every run", "slice 1", "slice 2"}
    assert 0.2 <= tiers["every run"] < tiers["slice 1"] < tiers["slice 2"] < 5


@pytest.mark.rotating(slice=2)
def test_two_workers_keep_a_unit_together_and_share_its_session_fixture_once(tmp_path):
    """`-n 2`: every reader of the launched run is one unit on one worker, so the session's one
    launched sweep runs once; tests outside a unit spread over both workers. Fails if a pytest or
    xdist release drops the groups again (pytest-dev/pytest-xdist#1386)."""
    tests = (
        "import os, time, pytest\n"
        "@pytest.fixture(scope='session')\n"
        "def launched_run():\n"
        "    with open('setups.txt', 'a') as f:\n"
        "        f.write(os.environ['PYTEST_XDIST_WORKER'] + '\\n')\n"
        "def test_a(launched_run):\n    time.sleep(0.5)\n"
        "def test_b(launched_run):\n    time.sleep(0.5)\n"
        "def test_c():\n    time.sleep(2)\n"
        "def test_d():\n    time.sleep(2)\n"
    )
    run = nested_pytest(tmp_path, tests, "-n", "2", "-v")
    assert (tmp_path / "setups.txt").read_text().count("\n") == 1, run.stdout
    workers = {line.split()[0] for line in run.stdout.splitlines() if "PASSED" in line}
    assert workers == {"[gw0]", "[gw1]"}, run.stdout
