"""What evalctl adds to a task's YAML (`TaskSpec`); the registry (`tasks.registry`) holds them by name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


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
