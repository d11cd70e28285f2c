"""docs/guide-add-task.md, step by step: a task of YAML and JSON in a folder of one's own, named by
--include-path or by its file; the refused kinds; and a registered task added as one new module
(a plug-in named by its `evalctl.tasks` entry point), with no edit to evalctl."""

from __future__ import annotations

import json
from pathlib import Path

import guides
import pytest
import yaml

from evalctl.config import config_from_dict
from evalctl.errors import BadInput
from evalctl.tasks import registry
from evalctl.tasks.lmeval import LmEvalTask
from evalctl.tasks.registry import resolved_data_dir

CAPITALS = [("France", "Paris"), ("Italy", "Rome"), ("Spain", "Madrid"), ("Peru", "Lima"), ("Chile", "Santiago"), ("Kenya", "Nairobi")]


def guide_block(language: str, index: int = 0) -> str:
    return guides.guide_block("guide-add-task.md", language, index)


@pytest.fixture
def my_tasks(tmp_path: Path) -> Path:
    """Step 1: the guide's YAML, with its two data files, in a folder of the user's own."""
    folder = tmp_path / "my_tasks"
    folder.mkdir()
    (folder / "capitals.yaml").write_text(guide_block("yaml"))
    docs = [{"country": c, "capital": k} for c, k in CAPITALS]
    (folder / "capitals-train.json").write_text(json.dumps(docs[:3]))
    (folder / "capitals-test.json").write_text(json.dumps(docs[3:]))
    return folder


def test_a_task_of_yaml_runs_under_its_filters_names(my_tasks: Path):
    task = LmEvalTask("capitals", include_path=my_tasks, data_dir=None, fewshot="shared")
    assert task.metric_names == ["first-word", "last-word"]  # the task's names, the primary first
    prompts = task.prompts(2, limit=None)
    assert [p.target for p in prompts] == ["Lima", "Santiago", "Nairobi"]
    # shared: the first two train exemplars before every question
    assert all(p.text.startswith("Q: What is the capital of France?\nA: Paris") for p in prompts)
    lima = prompts[0]
    assert task.score(lima, " Lima").correct == {"first-word": True, "last-word": True}
    assert task.score(lima, " It is Lima").correct == {"first-word": False, "last-word": True}
    assert task.score(lima, " ...").answers == {"first-word": None, "last-word": None}  # nothing extracted: invalid, not wrong
    by_file = LmEvalTask(str(my_tasks / "capitals.yaml"), data_dir=None, fewshot="shared")
    assert by_file.name == "capitals" and [p.prompt_hash for p in by_file.prompts(2, None)] == [p.prompt_hash for p in prompts]


def test_the_config_names_the_task_and_its_folder(my_tasks: Path):
    config = config_from_dict(
        {"model": "m", "task": "capitals", "include_path": str(my_tasks), "servers": [{"name": "cpu", "model_path": "x.gguf"}]},
        None,
        "test",
    )
    assert config.task == "capitals" and config.include_path == my_tasks
    assert resolved_data_dir(config.task, config.data_dir) is None  # the task reads the data its YAML names


def test_loglikelihood_tasks_and_groups_are_refused_with_the_guides_error(my_tasks: Path):
    config = yaml.safe_load((my_tasks / "capitals.yaml").read_text())
    (my_tasks / "my-mc.yaml").write_text(yaml.safe_dump({**config, "task": "my-mc", "output_type": "multiple_choice"}))
    with pytest.raises(BadInput) as refused:
        LmEvalTask("my-mc", include_path=my_tasks, data_dir=None, fewshot="shared")
    shown = " ".join(guide_block("", 1).split()).removeprefix("error: ")
    assert str(refused.value) == shown
    with pytest.raises(BadInput, match="'mmlu' is an lm-eval group of tasks"):
        LmEvalTask("mmlu", data_dir=None, fewshot="shared")


def test_a_registered_task_is_one_new_module(my_tasks: Path, monkeypatch):
    guides.plugged_in(monkeypatch, my_tasks.parent, "guide-add-task.md", registry.TASKS)  # the module beside my_tasks/
    spec = registry.registered_task("capitals")
    assert spec is not None and spec.yaml_dir == my_tasks
    task = LmEvalTask("capitals", data_dir=None, fewshot="shared")  # no --include-path: the registry knows the folder
    assert task.metric_names == ["strict", "last-word"]  # the module renamed first-word
    lima = task.prompts(0, None)[0]
    assert task.score(lima, " lima").correct == {"strict": False, "last-word": False}  # exact_match is case-sensitive
    assert task.score(lima, " Lima").correct == {"strict": True, "last-word": True}
    assert lima.target == "LIMA"  # the module's own reference form, in the records


def test_a_plugin_that_cannot_load_is_bad_input(tmp_path: Path, monkeypatch):
    guides.dist_info(tmp_path, "broken", {"evalctl.tasks": {"capitals": "no_such_evalctl_plugin:CAPITALS"}})
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry.TASKS, "_items", {})
    monkeypatch.setattr(registry.TASKS, "_complete", False)
    with pytest.raises(BadInput, match="cannot load evalctl plug-in capitals = 'no_such_evalctl_plugin:CAPITALS'"):
        registry.registered_task("gsm8k")
