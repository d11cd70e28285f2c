"""Every command's failure paths against the one exit-code table (`evalctl.errors.ExitCode`).

In process (CliRunner drives the same root command as the `evalctl` script); the paths that need a
real server, Slurm or a signal are covered where those run (test_sweep_cpu, test_slurm_cpu,
test_reliability_cpu, test_probe_cpu) and assert the same names.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from analysis.frames import sweep_frame
from test_gate_cli import cli, write_run
from typer.testing import CliRunner

import evalctl.errors
from evalctl.cli import app
from evalctl.errors import ExitCode

CLI_DIR = Path(evalctl.errors.__file__).parent / "cli"


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("exit-codes")
    flipped = set(range(30))
    corrupt = root / "corrupt"
    corrupt.mkdir()
    (corrupt / "manifest.json").write_text("{not json")
    (corrupt / "records.jsonl").write_text("")
    (root / "a-file").write_text("kept")
    (root / "bad-policy.yaml").write_text("alpha: 7\n")
    (root / "not-yaml.yaml").write_text("alpha: [\n")
    return {
        "root": root,
        "good": write_run(root, "good", sweep_frame()),
        "bad": write_run(root, "bad", sweep_frame(to_wrong={16: flipped, 20: flipped})),
        "small": write_run(root, "small", sweep_frame(n=10, to_wrong={s: {0, 1} for s in (8, 16, 20)})),
        "other": write_run(root, "other", sweep_frame(n=40).assign(prompt_hash="other-fewshot")),
        "corrupt": corrupt,
        "file": root / "a-file",
        "missing": root / "nope",
        "bad-policy": root / "bad-policy.yaml",
        "not-yaml": root / "not-yaml.yaml",
    }


# (command line with {folder} placeholders, exit status, a fragment of what the user is told)
CASES = [
    # click's own usage errors (click alone exits 2, which is INCONCLUSIVE here)
    (["no-such-command"], ExitCode.BAD_INPUT, "No such command"),
    (["gate", "--no-such-option"], ExitCode.BAD_INPUT, "No such option"),
    (["sweep", "--limit", "many"], ExitCode.BAD_INPUT, "Invalid value"),
    (
        ["sweep", "--model", "smollm2-135m", "--url", "http://127.0.0.1:9", "--engine", "no-such-engine"],
        ExitCode.BAD_INPUT,
        "unknown engine 'no-such-engine'; known:",
    ),
    (["history"], ExitCode.BAD_INPUT, "Missing option"),
    (["dashboard", "--latest", "0"], ExitCode.BAD_INPUT, "Invalid value"),
    (["servers", "show", "--no-such-option"], ExitCode.BAD_INPUT, "No such option"),
    # gate: its verdict, or a tool failure, never the same code
    (["gate", "{good}"], ExitCode.PASS, "verdict: pass"),
    (["gate", "{bad}"], ExitCode.REGRESSION, "verdict: regression"),
    (["gate", "{small}"], ExitCode.INCONCLUSIVE, "verdict: inconclusive"),
    (["gate", "{missing}"], ExitCode.BAD_INPUT, "is not a directory"),
    (["gate", "{corrupt}"], ExitCode.BAD_INPUT, "manifest.json is corrupt"),
    (["gate", "{good}", "--policy", "{bad-policy}"], ExitCode.BAD_INPUT, "alpha"),
    (["gate", "{good}", "--policy", "{not-yaml}"], ExitCode.BAD_INPUT, "not-yaml.yaml"),
    (["gate", "{good}", "--policy", "cpu-smoke"], ExitCode.PASS, "verdict: pass"),  # a policy by name
    (["gate", "{good}", "--policy", "cpu-smoek"], ExitCode.BAD_INPUT, "unknown gate policy 'cpu-smoek'; known: agreement,"),
    (["gate", "{good}", "--baseline", "{other}"], ExitCode.BAD_INPUT, "share no questions"),
    (["gate", "{good}", "--output", "{file}/gate"], ExitCode.INTERNAL, "Not a directory"),  # a disk error is no verdict
    # the other commands
    (["sweep", "--model", "no-such-model"], ExitCode.BAD_INPUT, "unknown model alias"),
    (["sweep", "--model", "smollm2-135m", "--shots", "a,b"], ExitCode.BAD_INPUT, "comma-separated integers"),
    (["sweep", "--model", "smollm2-135m", "--wait"], ExitCode.BAD_INPUT, "--wait applies to --executor slurm"),
    (["probe"], ExitCode.BAD_INPUT, "give --model NAME, --config FILE or --url URL"),
    (["probe", "--url", "http://127.0.0.1:9", "--policy", "{not-yaml}"], ExitCode.BAD_INPUT, "invalid YAML in probe policy"),
    (["compare", "{good}", "{missing}"], ExitCode.BAD_INPUT, "is not a directory"),
    (["compare", "{other}", "{good}"], ExitCode.BAD_INPUT, "share no questions"),
    (["compare", "{good}", "{bad}"], ExitCode.PASS, "Flipped questions"),
    (["analyze", "{corrupt}"], ExitCode.BAD_INPUT, "manifest.json is corrupt"),
    (["analyze", "{good}", "--policy", "{bad-policy}"], ExitCode.BAD_INPUT, "alpha"),
    (["report", "{missing}"], ExitCode.BAD_INPUT, "is not a directory"),
    (["runs", "list", "--since", "yesterday", "--root", "{root}"], ExitCode.BAD_INPUT, "--since must be a date"),
    (["history", "--model", "m", "--cache", "maybe", "--root", "{root}"], ExitCode.BAD_INPUT, "--cache must be on or off"),
    (
        ["history", "--model", "m", "--metric", "speed", "--root", "{root}"],
        ExitCode.BAD_INPUT,
        "metric must be one of accuracy, throughput",
    ),
    (["dashboard", "--root", "{missing}", "--output", "{root}/site"], ExitCode.BAD_INPUT, "is not a directory"),
    (["dashboard", "--root", "{root}", "--output", "{file}"], ExitCode.BAD_INPUT, "is not a folder"),
    (["dashboard", "--root", "{good}", "--output", "{file}/site"], ExitCode.INTERNAL, "cannot write the site"),
    (["servers", "show", "--model", "nemotron-nano-9b", "--variants", "nightly"], ExitCode.BAD_INPUT, "unknown variant"),
    (["canary", "--upstream", "http://127.0.0.1:9", "--fault", "no-such-fault"], ExitCode.BAD_INPUT, "unknown fault"),
    (["canary", "--upstream", "http://127.0.0.1:9", "--fault", "lost-prefix"], ExitCode.RUN_FAILED, "unreachable"),
    (["models", "list"], ExitCode.PASS, "smollm2-135m"),
    (["models", "show"], ExitCode.BAD_INPUT, "No such command"),
    (["jobs", "{good}"], ExitCode.BAD_INPUT, "was not submitted to Slurm"),
    (["jobs", "{missing}"], ExitCode.BAD_INPUT, "nope"),
]


@pytest.mark.parametrize(("args", "status", "told"), CASES, ids=[" ".join(c[0][:3]) + f" -> {c[1].name}" for c in CASES])
def test_command_exits_with_its_row_of_the_table(folders, args, status, told):
    out = cli(*(a.format(**{k: str(v) for k, v in folders.items()}) for a in args))
    assert out.exit_code == status, out.output
    assert told in " ".join(out.output.split()), out.output
    assert "Traceback" not in out.output


def test_an_unexpected_exception_is_internal_not_a_regression(folders, monkeypatch):
    """Python's own exit status for an uncaught exception is 1, which would read as a regression."""

    def bug(*_args, **_kwargs):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr("evalctl.analysis.gate.evaluate", bug)
    out = cli("gate", str(folders["good"]))
    assert out.exit_code == ExitCode.INTERNAL, out.output
    assert "internal error" in out.output and "ZeroDivisionError" in out.output


def test_no_args_prints_help_and_the_table():
    out = CliRunner().invoke(app, ["--help"])
    assert out.exit_code == ExitCode.PASS
    text = " ".join(out.output.split())
    for line in ExitCode.table():
        assert " ".join(line.split()) in text


def test_the_table_is_documented_once_as_the_enum_says():
    doc = " ".join(evalctl.errors.__doc__.split())
    for line in ExitCode.table():
        assert " ".join(line.split()) in doc
    assert {c.value for c in ExitCode} == {0, 1, 2, 3, 4, 5, 130, 143}


def test_commands_name_exit_statuses_by_the_table_only():
    """No bare integer exit status in the CLI: typer.Exit(n) and fail(msg, n) take an ExitCode."""
    bare = []
    for path in CLI_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "attr", getattr(node.func, "id", ""))
                given = [*node.args[1:]] if name == "fail" else [*node.args] if name == "Exit" else []
                given += [k.value for k in node.keywords if k.arg in ("code", "exit_code")]
                bare += [f"{path.name}:{node.lineno}" for a in given if isinstance(a, ast.Constant) and isinstance(a.value, int)]
    assert not bare


def test_the_readme_shows_the_same_table():
    readme = (Path(evalctl.errors.__file__).parents[1] / "README.md").read_text()
    for code in ExitCode:
        assert f"| {code.value} | `{code.name}` | {code.meaning} |" in readme, code.name
