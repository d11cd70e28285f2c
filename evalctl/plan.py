"""The plan: what a run asks, built once from its config (`build`), the one place a config becomes prompts.

One server per (profile, variant, cache mode) launch, every shot count, concurrency level and pass run against it
before it is stopped. Each cell carries its exact prompts (`CellPlan`); the manifest records their digest (`Plan.record`).
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from itertools import product

from evalctl.cell import CellKey
from evalctl.manifest import PlannedCell
from evalctl.schema import CacheMode, ServerProfile, SweepConfig, Variant
from evalctl.tasks.conversation import shared_prefix
from evalctl.tasks.lmeval import LmEvalTask, Prompt, task_of


@dataclass(frozen=True)
class ServerLaunch:
    profile: ServerProfile
    variant: Variant
    cache: CacheMode
    cells: tuple[CellKey, ...]

    @property
    def label(self) -> str:
        return f"{self.profile.name}/{self.variant.name} cache={self.cache.value}"


@dataclass(frozen=True)
class CellPlan:
    """One cell's requests: the task's prompts in its order, and in the seeded order the sequential gate sends them."""

    key: CellKey
    prompts: tuple[Prompt, ...]
    send_order: tuple[Prompt, ...]
    # What a prefix cache can hold: (prefix, how many prompts start with it), each its own few-shot list's;
    # a workload's one shared opening (its histories are its own cache load, not the plan's expectation).
    held: tuple[tuple[str, int], ...]

    @cached_property
    def shared_prefix(self) -> str:
        return shared_prefix(self.prompts)


@dataclass(frozen=True)
class Plan:
    config: SweepConfig
    task: LmEvalTask
    launches: tuple[ServerLaunch, ...]
    cells: dict[CellKey, CellPlan]

    def record(self) -> list[PlannedCell]:
        """The manifest's record: per cell its question count and a digest of which (doc ids and prompt hashes, in order)."""

        def digest(cell: CellPlan) -> str:
            return hashlib.sha256("".join(f"{p.doc_id}:{p.prompt_hash}\n" for p in cell.prompts).encode()).hexdigest()[:16]

        return [PlannedCell(**key.as_dict(), questions=len(cell.prompts), prompts=digest(cell)) for key, cell in self.cells.items()]


def prompts_at(task: LmEvalTask, shots: int, limit: int | None) -> tuple[Prompt, ...]:
    """The task's prompts at `shots`, its first `limit` questions: the one place a task becomes prompts (cells, probe bins)."""
    return tuple(task.prompts(shots, limit))


def _held(prompts: tuple[Prompt, ...], workload: str | None) -> tuple[tuple[str, int], ...]:
    """`CellPlan.held`: each prompt's longest prefix shared with another prompt (its neighbours in sorted order), cut back
    to a line's end so the prompts of one list or exemplar block agree on it (not on the first letters of their
    questions), counted; with a workload, only the opening every request shares."""
    if workload is not None:
        opening = shared_prefix(prompts)
        return ((opening, len(prompts)),) if opening else ()
    texts = sorted(p.text for p in prompts)
    if len(texts) < 2:
        return ()
    common = [len(os.path.commonprefix(pair)) for pair in zip(texts, texts[1:])]
    held = Counter()
    for i, text in enumerate(texts):
        longest = text[: max(common[i - 1] if i else 0, common[i] if i < len(common) else 0)]
        held[longest[: longest.rfind("\n") + 1]] += 1
    return tuple((prefix, count) for prefix, count in held.items() if prefix)


def noise_cells(config: SweepConfig, launch: ServerLaunch) -> tuple[CellKey, ...]:
    """The cells the A/A arm repeats on this launch's server: its reference cells (cache off when the sweep
    has it: what cache-on cells are compared with), every shot count, lowest concurrency, first pass; none without `noise`.

    Every variant and shot count gets its own: each cache-on cell's warm-vs-cold disagreement is judged
    against the cold-vs-cold floor of its own build on its own prompts (`analysis.floor`); a floor
    borrowed from another build or prefill length would not hold for it."""
    reference = CacheMode.off if CacheMode.off in config.cache else CacheMode.on
    if not config.noise or launch.cache is not reference:
        return ()
    return tuple(cell for cell in launch.cells if cell.pass_index == 1 and cell.concurrency == config.concurrency[0])


def expand(config: SweepConfig) -> list[ServerLaunch]:
    """The launches and their cells, without prompts (all `evalctl servers show` needs)."""
    cells = list(product(config.shots, config.concurrency, range(1, config.passes + 1)))
    return [
        ServerLaunch(profile, variant, cache, tuple(CellKey(profile.name, variant.name, cache, *cell) for cell in cells))
        for profile in config.servers
        for variant in config.active_variants()
        for cache in config.cache
    ]


def build(config: SweepConfig) -> Plan:
    """The run's plan: its task (data checked), its launches and every cell's prompts; identical across cache modes,
    variants and concurrency levels (so they pair)."""
    task = task_of(config)
    prompts = {shots: prompts_at(task, shots, config.limit) for shots in config.shots}
    order = {shots: tuple(task.in_send_order(list(p))) if p else () for shots, p in prompts.items()}
    launches = tuple(expand(config))
    held = {shots: _held(p, config.workload) for shots, p in prompts.items()}
    cells = {key: CellPlan(key, prompts[key.shots], order[key.shots], held[key.shots]) for launch in launches for key in launch.cells}
    return Plan(config, task, launches, cells)
