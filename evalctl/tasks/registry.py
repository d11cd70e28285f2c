"""The task registry: the tasks evalctl knows by name, each registered by its own module.

A task is an lm-eval `generate_until` task YAML, named as one of:
- a registered task (a `TaskSpec`: evalctl's own, or a plug-in's `evalctl.tasks` entry point), which may
  add what YAML cannot say (metric aliases, a packaged data copy);
- a task in a folder of the user's YAML (`--include-path DIR`), or a task YAML path given as the task;
- any task lm-eval itself registers (its data from the hub, or a local copy via `--data-dir`).
"""

from __future__ import annotations

import os
from pathlib import Path

from evalctl.registry import Registry
from evalctl.tasks.spec import TaskSpec, whole_target

# A plug-in imports TaskSpec (and whole_target) from here.
__all__ = ["TASKS", "TaskSpec", "registered_task", "registered_tasks", "resolved_data_dir", "whole_target"]


TASKS: Registry[TaskSpec] = Registry(
    "task", ("evalctl.tasks.gsm8k:GSM8K", "evalctl.tasks.prefix_recall:PREFIX_RECALL"), key=lambda spec: spec.name
)


def registered_tasks() -> dict[str, TaskSpec]:
    return TASKS.items()


def registered_task(name: str) -> TaskSpec | None:
    """The registered spec of `name`, or None for a task that lives only in YAML."""
    return TASKS.find(name)


DATA_DIR_ENV = "EVALCTL_DATA_DIR"
HUB_DATA = "hub"  # data_dir value that reads the task's data from the Hugging Face hub


def resolved_data_dir(task: str, data_dir: Path | None) -> Path | None:
    """The local copy `task` reads (the packaged one unless `data_dir` or the environment names another); None for the
    hub and for generated tasks (built from the seed: no data files to read or fingerprint)."""
    spec = registered_task(task)
    if spec is not None and spec.generated:
        return None
    # The environment's copy is for evalctl's registered tasks; a task of YAML reads what its YAML names.
    chosen = data_dir if data_dir is not None else os.environ.get(DATA_DIR_ENV) if spec is not None else None
    if chosen is None:
        from evalctl.datasets import packaged_data_dir

        return packaged_data_dir(task) if spec is not None and spec.packaged_data else None
    return None if str(chosen) == HUB_DATA else Path(chosen)
