"""The task registry: the tasks evalctl knows by name, each registered by its own module.

A task is an lm-eval `generate_until` task YAML. Three ways to name one:
- a registered task (`register_task`): evalctl's own (`gsm8k`, `prefix-recall`) or a plug-in's
  (`evalctl.plugins`), which may add what YAML cannot say (metric aliases, a packaged data copy);
- a task in a folder of the user's YAML (`--include-path DIR`, lm-eval's `--include_path`), or
  a task YAML path given as the task;
- any task lm-eval itself registers (its data from the hub, or a local copy via `--data-dir`).
Only the first needs Python; the others are plain lm-eval task files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from evalctl.errors import BadInput


def whole_target(target: str) -> str:
    """The reference answer as the task's `doc_to_target` renders it."""
    return target.strip()


@dataclass(frozen=True)
class TaskSpec:
    """What evalctl adds to a task's YAML.

    `metric_names` renames the task's filters in records and reports (gsm8k keeps its run
    folders' `strict`/`flexible`); unnamed filters keep the task's own name. A `generated` task
    builds its documents from the seed and counts the prefix's records as shots (`min_shots` 1).
    """

    name: str
    yaml_dir: Path  # the folder holding the task's YAML (lm-eval indexes only this folder)
    metric_names: dict[str, str] = field(default_factory=dict)
    generated: bool = False
    min_shots: int = 0
    target: Callable[[str], str] = whole_target
    packaged_data: bool = False  # a copy ships in evalctl/datasets/<name>


class UnknownTask(BadInput):
    """A task name no registry, include path or lm-eval index knows."""


_TASKS: dict[str, TaskSpec] = {}
# evalctl's own task modules, imported on first look-up (each registers its task).
BUILTIN_MODULES = ("evalctl.tasks.gsm8k", "evalctl.tasks.prefix_recall")


def register_task(spec: TaskSpec) -> TaskSpec:
    """Add `spec` under its name; a second task of the same name is a mistake, not an override."""
    if spec.name in _TASKS and _TASKS[spec.name] != spec:
        raise ValueError(f"task {spec.name!r} is already registered")
    _TASKS[spec.name] = spec
    return spec


def _load() -> None:
    import importlib

    from evalctl.plugins import load_plugins

    for module in BUILTIN_MODULES:
        importlib.import_module(module)
    load_plugins()


def registered_tasks() -> dict[str, TaskSpec]:
    _load()
    return dict(_TASKS)


def registered_task(name: str) -> TaskSpec | None:
    """The registered spec of `name`, or None for a task that lives only in YAML."""
    return registered_tasks().get(name)
