"""What evalctl adds to a task's YAML (`TaskSpec`), which the registry (`tasks.registry`) holds by name; and the `Prompt`s a task makes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from evalctl.records import AnswerPosition, TurnKind

if TYPE_CHECKING:
    from evalctl.schema import SweepConfig


def whole_target(target: str) -> str:
    """The reference answer as the task's `doc_to_target` renders it."""
    return target.strip()


@dataclass(frozen=True)
class TaskSpec:
    """What evalctl adds to a task's YAML: `metric_names` renames its filters in records and reports (unnamed ones
    keep the task's name); a `generated` task builds its documents from the seed (no data files)."""

    name: str
    yaml_dir: Path  # the folder holding the task's YAML (lm-eval indexes only this folder)
    metric_names: dict[str, str] = field(default_factory=dict)
    generated: bool = False
    min_shots: int = 0
    target: Callable[[str], str] = whole_target
    packaged_data: bool = False  # a copy ships in evalctl/datasets/<name>


@dataclass(frozen=True)
class Prompt:
    doc_id: int
    text: str
    prompt_hash: str
    question: str
    target: str
    stop: tuple[str, ...]
    doc: dict
    # prefix-recall: where the asked value sits (character offset in `text`, and its bin)
    answer_char_offset: int | None = None
    answer_position: AnswerPosition | None = None
    # conversation workloads (`tasks.conversation`): which conversation, how many turns, how the request got there
    conversation: int | None = None
    turn: int | None = None
    turn_kind: TurnKind | None = None
    source_doc_id: int | None = None  # the task's doc id of the question asked (doc_id numbers the requests)
    # judged at returns only (`conversation.judge`): the unscored requests a cache-on server gets before this one
    history: tuple[str, ...] = ()


@dataclass(frozen=True)
class Workload:
    """A named way to send a task's questions: the cell's requests, in send order per conversation
    (`Prompt.conversation` groups what must go one after another's answer)."""

    name: str
    summary: str
    # (the task's prompts, how it answers them: a `tasks.conversation.Transcript`, the config) -> the requests
    build: Callable[[list[Prompt], object, SweepConfig], list[Prompt]]
