"""Model aliases and gate policies: the user's EVALCTL_CONFIG_PATH folders first, then the packaged ones."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalctl.analysis.gate import load_policy
from evalctl.cli import app
from evalctl.cli.common import console
from evalctl.config import load_config
from evalctl.config_files import CONFIG_PATH_ENV, PACKAGED, POLICY_FOLDER, find, known, packaged_dir, policy_file, read_yaml
from evalctl.errors import BadInput, ConfigError, ExitCode

ALIAS = """
model: my-model
task: prefix-recall
shots: [1]
servers:
  - {name: a, engine: vllm, model_path: m}
  - {name: b, engine: sglang, model_path: m}
"""


@pytest.fixture
def user_folders(tmp_path, monkeypatch) -> tuple[Path, Path]:
    first, second = tmp_path / "first", tmp_path / "second"
    for folder in (first, second):
        (folder / POLICY_FOLDER).mkdir(parents=True)
    (first / "mine.yaml").write_text(ALIAS)
    (second / "mine.yaml").write_text(ALIAS.replace("my-model", "shadowed"))
    (second / "smollm2-135m.yaml").write_text(ALIAS.replace("my-model", "my-smollm"))
    (second / "broken.yaml").write_text("servers: 3\n")
    (first / POLICY_FOLDER / "strict.yaml").write_text("alpha: 0.01\n")
    monkeypatch.setenv(CONFIG_PATH_ENV, os.pathsep.join([str(first), "", str(second)]))
    return first, second


def test_packaged_configs_are_package_data(monkeypatch):
    monkeypatch.delenv(CONFIG_PATH_ENV, raising=False)
    assert packaged_dir() == Path(str(resources.files("evalctl.configs")))
    assert {"smollm2-135m", "nemotron-nano-9b"} <= set(known())
    assert {f.source for f in known().values()} == {PACKAGED}
    assert set(known(POLICY_FOLDER)) >= {"default", "cpu-smoke"}
    assert policy_file("cpu-smoke") == packaged_dir() / POLICY_FOLDER / "cpu-smoke.yaml"


def test_user_folders_come_first_in_their_order(user_folders):
    first, second = user_folders
    mine = find("mine")
    assert (mine.path, mine.source, mine.shadows) == (first / "mine.yaml", str(first), (str(second),))
    assert find("smollm2-135m").shadows == (PACKAGED,)  # a user's file of a packaged name wins
    assert load_config(model="mine").model == "my-model"
    assert load_config(model="smollm2-135m").model == "my-smollm"
    assert load_config(model="nemotron-nano-9b").model  # still found in the packaged folder
    assert load_policy(policy_file("strict")).alpha == 0.01
    assert policy_file("no/such.yaml") == Path("no/such.yaml")  # not a name: a path


def test_a_config_path_is_read_as_given_before_any_search(user_folders, tmp_path):
    given = tmp_path / "smollm2-135m.yaml"
    given.write_text(ALIAS.replace("my-model", "given"))
    assert load_config(config_file=given).model == "given"


def test_unknown_alias_lists_the_users_and_the_packaged_ones(user_folders):
    with pytest.raises(ConfigError) as exc:
        load_config(model="nope")
    assert "known: broken, mine, nemotron" in str(exc.value) and "smollm2-135m" in str(exc.value)


def test_read_yaml_names_the_file_and_raises_the_callers_error(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("")
    assert read_yaml(bad, "gate policy") == {}  # an empty policy: every default
    for text, told in (("a: [\n", "invalid YAML in gate policy"), ("- 1\n", "must be a mapping at the top level")):
        bad.write_text(text)
        with pytest.raises(BadInput, match=told):
            read_yaml(bad, "gate policy", BadInput)
    with pytest.raises(ConfigError, match="cannot read config .*missing.yaml: No such file"):
        read_yaml(tmp_path / "missing.yaml", "config", ConfigError)


def test_models_list_shows_each_alias_its_task_engines_and_origin(user_folders, monkeypatch):
    first, second = user_folders
    monkeypatch.setattr(console, "width", 400)  # one row per line, long paths whole
    out = CliRunner().invoke(app, ["models", "list"])
    assert out.exit_code == ExitCode.PASS, out.output
    lines = {line.split()[0]: " ".join(line.split()) for line in out.output.splitlines() if line.strip()}
    assert lines["mine"] == f"mine prefix-recall sglang, vllm {first} (over {second})"
    assert lines["smollm2-135m"] == f"smollm2-135m prefix-recall sglang, vllm {second} (over {PACKAGED})"
    assert lines["smollm2-135m-recall"] == f"smollm2-135m-recall prefix-recall llamacpp {PACKAGED}"
    assert lines["broken"].startswith("broken - invalid: ") and "servers" in lines["broken"]  # listed, not a crash
    assert lines["strict"] == f"strict {first}" and lines["cpu-smoke"] == f"cpu-smoke {PACKAGED}"
