"""Bisect inputs without a server: builds from git and from a list, the --from-run's cells, step configs, bisect.json, bad input."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from analysis.frames import sweep_frame
from test_gate_cli import cli, write_run

from evalctl.bisect.builds import BuildInputError, commits, filled, git_builds, listed_builds, version_builds
from evalctl.bisect.state import BisectState, Settings, StateError, load_state
from evalctl.bisect.steps import regression_of, step_config
from evalctl.errors import BadInput
from evalctl.schema import StoppingMode, Variant


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout.strip()


def commit(repo: Path, name: str) -> str:
    (repo / name).write_text(name)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", name)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """main: c0 c1 (merge of side: s1 s2) c3; a commit `elsewhere` on another branch off c0."""
    path = tmp_path_factory.mktemp("repo")
    git(path, "init", "-q", "-b", "main")
    shas = {"c0": commit(path, "c0"), "c1": commit(path, "c1")}
    git(path, "checkout", "-qb", "side")
    shas["s1"], shas["s2"] = commit(path, "s1"), commit(path, "s2")
    git(path, "checkout", "-q", "main")
    shas["c2"] = commit(path, "c2")
    git(path, "merge", "-q", "--no-ff", "-m", "merge side", "side")
    shas["merge"] = git(path, "rev-parse", "HEAD")
    shas["c3"] = commit(path, "c3")
    git(path, "checkout", "-qb", "other", shas["c0"])
    shas["elsewhere"] = commit(path, "elsewhere")
    git(path, "checkout", "-q", "main")
    return path, shas


def test_commits_first_parent_by_default_and_merged_branches_with_all_commits(repo):
    path, shas = repo
    first = [sha for sha, _ in commits(path, shas["c0"], "main")]
    assert first == [shas[k] for k in ("c0", "c1", "c2", "merge", "c3")]
    every = [sha for sha, _ in commits(path, shas["c0"], "main", all_commits=True)]
    assert set(every) == set(first) | {shas["s1"], shas["s2"]} and every[0] == shas["c0"] and every[-1] == shas["c3"]
    assert commits(path, shas["c1"], shas["c2"])[1][1] == "c2"  # subjects kept


@pytest.mark.parametrize(
    ("good", "bad", "message"),
    [("nope", "main", "'nope' is not a commit"), ("main", "c0", "is not an ancestor"), ("elsewhere", "main", "is not an ancestor")],
)
def test_bad_revisions_are_clear_errors(repo, good, bad, message):
    path, shas = repo
    with pytest.raises(BuildInputError, match=message):
        commits(path, shas.get(good, good), shas.get(bad, bad))


def test_not_a_repository(tmp_path):
    with pytest.raises(BuildInputError, match="failed|not a directory"):
        commits(tmp_path, "a", "b")


def test_worktree_is_substituted_everywhere_in_the_variant(repo, tmp_path):
    path, shas = repo
    template = Variant(
        name="nightly", python="{worktree}/venv/bin/python", env={"PYTHONPATH": "{worktree}/python"}, extra_args=["--x={worktree}"]
    )
    found = git_builds(path, shas["c0"], shas["c3"], template, tmp_path / "wt")
    assert len(found) == 5 and found[0].revision == shas["c0"]
    v = found[2].variant
    assert v.env["PYTHONPATH"] == f"{found[2].worktree}/python" and v.python.startswith(str(tmp_path / "wt"))
    assert v.git_revision == shas["c2"] and v.extra_args == [f"--x={found[2].worktree}"]
    assert filled(template, Path("/w"), None).command_prefix == []


def test_builds_file(tmp_path):
    good = tmp_path / "builds.yaml"
    good.write_text(yaml.safe_dump({"builds": [{"name": f"b{i}", "python": f"/venvs/{i}/bin/python"} for i in range(4)]}))
    assert [b.name for b in listed_builds(good)] == ["b0", "b1", "b2", "b3"]
    cases = {
        "few.yaml": [{"name": "a"}, {"name": "b"}],
        "dup.yaml": [{"name": "a"}, {"name": "a"}, {"name": "c"}],
        "field.yaml": [{"name": "a", "pyton": "x"}, {"name": "b"}, {"name": "c"}],
    }
    for name, data in cases.items():
        (tmp_path / name).write_text(yaml.safe_dump(data))
        with pytest.raises(BuildInputError, match=r"need the good one|repeat|pyton"):
            listed_builds(tmp_path / name)
    with pytest.raises(BuildInputError, match="cannot read"):
        listed_builds(tmp_path / "missing.yaml")


@pytest.fixture(scope="module")
def gated(tmp_path_factory):
    root = tmp_path_factory.mktemp("from-run")
    flipped = set(range(30))
    bad = write_run(root, "bad", sweep_frame(to_wrong={16: flipped, 20: flipped}))
    good = write_run(root, "good", sweep_frame())
    assert cli("gate", str(bad), "--baseline", str(good)).exit_code == 1
    assert cli("gate", str(good)).exit_code == 0
    return {"bad": bad, "good": good, "ungated": write_run(root, "ungated", sweep_frame())}


def test_the_from_run_gives_the_regressed_cells_and_the_policy(gated, tmp_path):
    regression = regression_of(gated["bad"])
    assert regression.cells.shots == [16, 20] and regression.cells.cache == ["on"]
    assert regression.policy.max_accuracy_drop == 0.03
    build = Variant(name="abc", python="/w/engine")
    ref = step_config(regression, build, tmp_path / "ref", baseline=None, tolerance=0.03, alpha=0.02)
    assert ref.stopping.mode is StoppingMode.fixed and ref.shots == [16, 20] and ref.cache == ["on"]
    assert [v.name for v in ref.variants] == [regression.cells.variant] and ref.variants[0].python == "/w/engine"
    assert ref.output_dir == tmp_path / "ref" and [p.name for p in ref.servers] == [regression.cells.profile]
    step = step_config(regression, build, tmp_path / "s", baseline=tmp_path / "ref", tolerance=0.1, alpha=0.02)
    assert step.stopping.mode is StoppingMode.sequential and step.stopping.tolerance == 0.1 and step.stopping.alpha == 0.02


@pytest.mark.parametrize(("name", "message"), [("good", "says 'pass', not regression"), ("ungated", "has no gate.json")])
def test_a_from_run_without_a_regression_is_refused(gated, name, message):
    with pytest.raises(BadInput, match=message):
        regression_of(gated[name])


def test_state_round_trip_and_a_corrupt_one(gated, tmp_path):
    regression = regression_of(gated["bad"])
    settings = Settings(from_run=gated["bad"], cells=regression.cells, step_alpha=0.02, target=0.95, max_launches=10)
    state = BisectState(settings=settings, builds=listed_builds_from(tmp_path))
    state.save(tmp_path)
    assert load_state(tmp_path) == state
    (tmp_path / "bisect.json").write_text("{not json")
    with pytest.raises(StateError, match="corrupt"):
        load_state(tmp_path)
    with pytest.raises(StateError, match="no bisect.json"):
        load_state(tmp_path / "nothing")


def listed_builds_from(tmp_path: Path, names: str = "abc"):
    path = tmp_path / "b.yaml"
    path.write_text(yaml.safe_dump([{"name": n} for n in names]))
    return listed_builds(path)


def test_cli_bad_input_is_refused_before_anything_runs(gated, tmp_path):
    code = BadInput.exit_status
    cases = [
        ([], "--from-run RUN is required"),
        (["--from-run", str(gated["good"]), "--builds", "x.yaml"], "not regression"),
        (["--from-run", str(gated["bad"])], "either --repo"),
        (["--from-run", str(gated["bad"]), "--repo", str(tmp_path)], "needs --good"),
        (["--from-run", str(gated["bad"]), "--builds", "missing.yaml", "-o", str(tmp_path / "o")], "not a builds file, nor PACKAGE"),
        (["--from-run", str(gated["bad"]), "--builds", "xllamacpp==1,2,3", "--find", "neither"], "Invalid value for '--find'"),
        (["--resume", str(tmp_path)], "no bisect.json"),
        (["--resume", str(tmp_path), "--from-run", str(gated["bad"])], "--resume takes the bisect folder alone"),
        (["--from-run", str(gated["bad"]), "--repo", str(tmp_path), "--good", "a", "--bad", "b", "-o", str(tmp_path / "o")], "failed"),
    ]
    for args, message in cases:
        out = cli("bisect", *args)
        assert out.exit_code == code, (args, out.output)
        assert message in " ".join(out.output.split()), (args, out.output)
    assert not (tmp_path / "o" / "bisect.json").exists()


def test_released_versions_are_builds_served_from_their_venvs():
    template = Variant(name="nightly", pip=["torch==2.13.0", "xllamacpp==0.2.14"], env={"OMP_NUM_THREADS": "2"}, extra_args=["-x"])
    found = version_builds("xllamacpp==0.2.13, 0.2.14,2026.5.9294", template)
    assert [b.label for b in found] == ["0.2.13", "0.2.14", "2026.5.9294"]
    assert found[2].variant.pip == ["torch==2.13.0", "xllamacpp==2026.5.9294"]  # the template's other requirements stay
    assert found[0].variant.env == {"OMP_NUM_THREADS": "2"} and found[0].variant.extra_args == ["-x"] and found[0].variant.python is None


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("xllamacpp==0.2.13,0.2.14", "need the good one"),
        ("xllamacpp==0.2.13,0.2.13,0.2.14", "versions repeat"),
        ("xllamacpp==0.2.13,next,0.2.14", "'next' is not a version"),
        ("builds.yaml", "not a builds file, nor PACKAGE==V1,V2"),
    ],
)
def test_bad_version_lists_are_clear_errors(spec, message):
    with pytest.raises(BuildInputError, match=message):
        version_builds(spec, Variant())


def test_a_bisect_for_a_fix_over_released_versions_searches_them_newest_first(gated, tmp_path):
    from evalctl.bisect.search import Find
    from evalctl.bisect.session import new_bisect

    regression = regression_of(gated["bad"])
    versions = "xllamacpp==0.2.13,0.2.14,2026.4.8672.1,2026.4.8929,2026.5.9093,2026.5.9294"
    folder, state = new_bisect(regression, gated["bad"], None, None, None, versions, None, None, {}, False, tmp_path / "b",
                               0.02, None, "local", Find.fix)  # fmt: skip
    assert [b.label for b in state.builds] == versions.partition("==")[2].split(",")[::-1]
    assert state.builds[0].variant.pip == ["xllamacpp==2026.5.9294"] and state.settings.find is Find.fix
    assert load_state(folder) == state


def test_a_conversation_workload_is_bisected_by_fixed_n_steps(gated, tmp_path):
    """Its steps cannot stop mid-conversation: every search step runs all requests (a sequential step config would be
    refused) and is judged by the gate's fixed-n rule against the reference at the steps' tolerance and alpha."""
    from evalctl.bisect.search import Verdict
    from evalctl.bisect.session import Bisect
    from evalctl.bisect.steps import Regression
    from evalctl.schema import ConversationConfig, StoppingMode

    regression = regression_of(gated["bad"])
    regression = Regression(
        regression.config.model_copy(update={"workload": "conversation", "conversation": ConversationConfig()}),
        regression.cells,
        regression.policy,
    )
    builds = listed_builds_from(tmp_path, "abcde")
    culprit = 3
    modes = []

    def runner(config, root):  # each build's answers: from the culprit on, 30 of 60 flipped in each regressed cell
        modes.append(config.stopping.mode)
        index = next(i for i, b in enumerate(builds) if root.name.endswith(f"-{b.name}"))
        flipped = set(range(30)) if index >= culprit else set()
        root.mkdir(parents=True)
        write_run(root, "run", sweep_frame(n=60, shots=(16, 20), to_wrong={16: flipped, 20: flipped}))
        return root / "run", []

    settings = Settings(from_run=gated["bad"], cells=regression.cells, step_alpha=0.02, target=0.95, max_launches=10)
    (tmp_path / "b").mkdir()
    state = Bisect(tmp_path / "b", BisectState(settings=settings, builds=builds), regression, runner).run()
    assert set(modes) == {StoppingMode.fixed}
    assert state.outcome == "culprit" and state.culprit == [culprit], state.message
    search = [s for s in state.steps if s.build not in (0, len(builds) - 1)]
    assert search and all("drop" in s.reason for s in search)  # the fixed-n rule's reason, not the sequential one's
    assert {s.build: s.verdict for s in search} == {s.build: Verdict.bad if s.build >= culprit else Verdict.good for s in search}
