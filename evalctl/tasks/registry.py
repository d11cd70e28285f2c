"""The task and workload registries: the tasks and workloads evalctl knows by name, each registered by its own module.

A task is an lm-eval `generate_until` task YAML, named as one of:
- a registered task (a `TaskSpec`: evalctl's own, or a plug-in's `evalctl.tasks` entry point), which may
  add what YAML cannot say (metric aliases, a packaged data copy);
- a task in a folder of the user's YAML (`--include-path DIR`), or a task YAML path given as the task;
- any task lm-eval itself registers (its data from the hub, or a local copy via `--data-dir`).

A workload (`Workload`) turns the task's prompts at one shot count into a cell's requests (`workload:`, `--workload
NAME`); with none a cell sends the questions alone. A plug-in names its `Workload` in an `evalctl.workloads` entry point.
A task's documents come from the hub, or a local copy for offline nodes (`resolved_data_dir`).
"""

from __future__ import annotations

import os
from pathlib import Path

from evalctl.errors import ConfigError
from evalctl.registry import Registry
from evalctl.tasks.spec import TaskSpec, Workload, whole_target

# A plug-in imports TaskSpec (and whole_target) or Workload from here.
__all__ = ["TASKS", "WORKLOADS", "TaskSpec", "Workload", "registered_task", "resolved_data_dir", "whole_target"]


TASKS: Registry[TaskSpec] = Registry(
    "task", ("evalctl.tasks.gsm8k:GSM8K", "evalctl.tasks.prefix_recall:PREFIX_RECALL"), key=lambda spec: spec.name
)
WORKLOADS: Registry[Workload] = Registry(
    "workload", ("evalctl.tasks.conversation:WORKLOAD", "evalctl.tasks.hunt:WORKLOAD"), key=lambda workload: workload.name
)


def registered_task(name: str) -> TaskSpec | None:
    """The registered spec of `name`, or None for a task that lives only in YAML."""
    return TASKS.find(name)


DATA_DIR_ENV = "EVALCTL_DATA_DIR"
HUB_DATA = "hub"  # data_dir value that reads the task's data from the Hugging Face hub
SPLIT_FILES = {"train": "train.jsonl", "test": "test.jsonl"}  # what a local copy holds


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


def local_dataset_overrides(data_dir: Path) -> dict:
    """lm-eval task fields that read `train.jsonl`/`test.jsonl` from `data_dir`."""
    if not data_dir.is_dir():
        raise ConfigError(f"data dir {data_dir} does not exist or is not a directory")
    files = {}
    for split, name in SPLIT_FILES.items():
        path = data_dir / name
        if not path.is_file():
            raise ConfigError(f"data dir {data_dir} has no {name} (needs {', '.join(SPLIT_FILES.values())})")
        if not os.access(path, os.R_OK):
            raise ConfigError(f"data file {path} is not readable")
        files[split] = str(path.resolve())
    return {"dataset_path": "json", "dataset_name": None, "dataset_kwargs": {"data_files": files}}
