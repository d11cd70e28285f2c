"""lm-eval's task machinery: prompts for each shot count, and scoring with the task's own filters.

Any lm-eval `generate_until` task runs (`tasks.registry` says how one is named); docs/guide-add-task.md
says why others are refused, how metrics are named and why few-shot mode `shared` (one prefix per cell,
lm-eval's `first_n` sampler) is the default beside `sampled` (a prefix per question).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from evalctl.errors import BadInput, ConfigError
from evalctl.registry import unknown_name
from evalctl.tasks.conversation import Transcript
from evalctl.tasks.registry import TASKS, WORKLOADS, TaskSpec, local_dataset_overrides, registered_task, resolved_data_dir
from evalctl.tasks.spec import Prompt

if TYPE_CHECKING:
    from evalctl.schema import SweepConfig

GENERATE = "generate_until"
INVALID = "[invalid]"  # lm-eval's regex filter's answer when nothing matched


@dataclass(frozen=True)
class Score:
    """One response scored by every metric of the task: the extracted answer (None: none) and whether it is right."""

    answers: dict[str, str | None]
    correct: dict[str, bool]


def prompt_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def locate_task(name: str, include_path: Path | None = None) -> tuple[str, Path, TaskSpec | None]:
    """The task's name, its YAML file and its registered spec (None for a task of YAML alone), looked up in turn as a
    YAML path given as the task, in the registry, in `include_path`, in lm-eval's own index."""
    from lm_eval.tasks import TaskManager

    if name.endswith((".yaml", ".yml")):
        path = Path(name)
        if not path.is_file():
            raise BadInput(f"task file {name} does not exist")
        from lm_eval.tasks._yaml_loader import load_yaml

        try:
            declared = load_yaml(path, resolve_func=False).get("task")
        except (OSError, ValueError) as exc:
            raise BadInput(f"cannot read task file {name}: {exc}") from exc
        if not isinstance(declared, str):
            raise BadInput(f"task file {name} names no `task:`")
        name, include_path = declared, path.resolve().parent
    spec = registered_task(name)
    folder = spec.yaml_dir if spec is not None else include_path
    if spec is None and folder is not None and not Path(folder).is_dir():
        raise BadInput(f"--include-path {include_path} is not a directory")
    # Index only the task's folder when known: scanning every lm-eval task takes seconds.
    manager = TaskManager(include_defaults=folder is None, include_path=str(folder) if folder else None)
    entry = manager.task_index.get(name)
    kind = getattr(getattr(entry, "kind", None), "name", "TASK").lower()
    if entry is not None and kind != "task":
        raise BadInput(f"{name!r} is an lm-eval {kind} of tasks, not one task: evalctl runs one task per sweep; name one of its tasks")
    if entry is None or entry.yaml_path is None:
        where = f" in {folder}" if folder else " among evalctl's and lm-eval's tasks (or --include-path DIR of task YAML)"
        known = TASKS.names() + ([n for n, e in manager.task_index.items() if e.yaml_path] if folder else [])
        raise unknown_name("task", [name], sorted(set(known)), where)
    return name, Path(entry.yaml_path), spec


def _local_data_files(config: dict, yaml_dir: Path) -> None:
    """`data_files` named relative to the task's YAML folder, as a user writes them beside it."""
    files = (config.get("dataset_kwargs") or {}).get("data_files")
    if files is None:
        return

    def resolved(value):
        if isinstance(value, dict | list):
            return {k: resolved(v) for k, v in value.items()} if isinstance(value, dict) else [resolved(v) for v in value]
        if isinstance(value, str) and not Path(value).is_absolute() and (yaml_dir / value).is_file():
            return str((yaml_dir / value).resolve())
        return value

    config["dataset_kwargs"] = {**config["dataset_kwargs"], "data_files": resolved(files)}


def metric_names(config: dict, spec: TaskSpec | None) -> list[tuple[str, str]]:
    """(filter name in the YAML, metric name in records) per filter, the primary first (no filters: the raw answer,
    named by the first metric)."""
    aliases = spec.metric_names if spec else {}
    filters = [f["name"] for f in config.get("filter_list") or []]
    if not filters:
        first = (config.get("metric_list") or [{"metric": "exact_match"}])[0]["metric"]
        return [("none", aliases.get("none", str(first)))]
    return [(f, aliases.get(f, f)) for f in filters]


class LmEvalTask:
    """One lm-eval generation task with evalctl's data source and few-shot mode."""

    def __init__(
        self,
        name: str,
        *,
        data_dir: Path | None,
        fewshot: str,
        seed: int = 1234,
        limit_order: str = "shuffled",
        limit_seed: int = 1234,
        include_path: Path | None = None,
        workload: Callable[[list[Prompt], Transcript], list[Prompt]] | None = None,
    ):
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        logging.getLogger("lm_eval").setLevel(logging.ERROR)
        self.name, yaml_path, self.spec = locate_task(name, include_path)
        self.generated = bool(self.spec and self.spec.generated)
        self.data_source = None if self.generated else data_dir  # generated tasks read no data dir
        from lm_eval.tasks._yaml_loader import load_yaml

        # Loaded in full: prefix-recall's `custom_dataset` is a function of its folder.
        config = copy.deepcopy(load_yaml(yaml_path, resolve_func=True))
        config.pop("tag", None)
        if config.get("output_type", GENERATE) != GENERATE:
            raise BadInput(
                f"task {self.name!r} is {config['output_type']}: evalctl scores generated answers (generate_until tasks only); "
                "log-likelihood scoring needs prompt log-probabilities that served completion APIs do not return alike"
            )
        _local_data_files(config, yaml_path.parent)
        if self.data_source is not None or self.generated or config.get("dataset_path") in ("json", "csv", "parquet", "text"):
            # No hub look-ups at all when the data are local.
            os.environ["HF_DATASETS_OFFLINE"] = "1"
        if self.generated:
            config["metadata"] = {**config.get("metadata", {}), "mode": fewshot, "seed": seed}
        else:
            if data_dir is not None:
                config.update(local_dataset_overrides(data_dir))
            if fewshot == "shared":
                config["fewshot_config"] = {"sampler": "first_n"}
        self.config = config
        # Scores every answer; for a generated task it also holds the YAML's default prefix.
        self.task = self._configurable(config)
        self.metrics = metric_names(config, self.spec)
        self.filters = self._filters(config)
        self.seed = seed
        self.limit_order, self.limit_seed = limit_order, limit_seed
        self._cache: dict[tuple[int, int | None], list[Prompt]] = {}
        self.workload = workload
        # The fewest shots that still make a prompt: a generated prefix needs a record to ask about.
        self.min_shots = self.spec.min_shots if self.spec else 0

    @property
    def metric_names(self) -> list[str]:
        """The task's metrics as records name them, the primary first."""
        return [metric for _, metric in self.metrics]

    @staticmethod
    def _filters(config: dict) -> dict:
        from lm_eval.filters import build_filter_ensemble

        filter_list = config.get("filter_list") or [{"name": "none", "filter": [{"function": "take_first"}]}]
        return {
            f["name"]: build_filter_ensemble(
                f["name"], [(c["function"], {k: v for k, v in c.items() if k != "function"}) for c in f["filter"]]
            )
            for f in filter_list
        }

    def _configurable(self, config: dict):
        from lm_eval.api.task import ConfigurableTask

        _reuse_compiled_templates()
        try:
            return ConfigurableTask(config=config)
        except Exception as exc:  # lm-eval/datasets raise many types for unreachable data
            where = self.data_source or config.get("dataset_path")
            raise ConfigError(f"cannot load task {self.name!r} data from {where}: {exc}") from exc

    def _task_at(self, shots: int, limit: int | None):
        """The lm-eval task object that builds the prompts at `shots`; a generated task is asked for
        `limit` questions (one list per question can be asked more often than it has records)."""
        if not self.generated:
            self.task.set_config(key="num_fewshot", value=shots)
            return self.task
        if shots < 1:
            raise ConfigError(f"task {self.name!r} counts records as shots: every shot count must be >= 1, got {shots}")
        task = self._configurable({**self.config, "metadata": {**self.config["metadata"], "records": shots, "questions": limit}})
        task.set_config(key="num_fewshot", value=0)  # the records are the prefix; no exemplars on top
        return task

    def questions(self, limit: int | None) -> list[int] | None:
        """The test questions (doc ids, ascending) `limit` keeps; None for all of them. `shuffled`: a random sample
        seeded by `limit_seed`, the same in every cell and run; `head`: the first `limit`, as lm-eval's --limit."""
        total = len(self.task.eval_docs)
        if limit is None or limit >= total:
            return None
        if self.limit_order == "head":
            return list(range(limit))
        return sorted(int(i) for i in np.random.default_rng(self.limit_seed).permutation(total)[:limit])

    def in_send_order(self, prompts: list[Prompt]) -> list[Prompt]:
        """`prompts` in the order of the `limit_seed` permutation (`questions`' own; a generated task's numbers per shot
        count): any prefix is a random sample, and cells stopped at the same look hold the same questions."""
        total = max(p.doc_id for p in prompts) + 1 if self.generated else len(self.task.eval_docs)
        rank = np.argsort(np.random.default_rng(self.limit_seed).permutation(total))
        return sorted(prompts, key=lambda p: rank[p.doc_id])

    def prompts(self, shots: int, limit: int | None) -> list[Prompt]:
        """The scored prompts at `shots`, identical across cache modes and variants: one per test question, or with a
        workload, its requests."""
        key = (shots, limit)
        if key not in self._cache:
            task = self._task_at(shots, limit)
            task.set_fewshot_seed(self.seed)  # same exemplars in every cell: runs stay paired
            # A generated task already orders its questions over the prefix (start/middle/end in
            # turn), so its first `limit` are the sample; a fixed test split is subsampled by seed.
            ids = None if self.generated else self.questions(limit)
            task.build_all_requests(limit=limit if self.generated else None, samples=ids, rank=0, world_size=1)
            # lm-eval numbers a sample 0..k-1 in test order; the doc id must be the test index.
            questions = [self._prompt(task, inst, ids[inst.doc_id] if ids else inst.doc_id) for inst in task.instances]
            if self.workload is not None:
                transcript = Transcript(
                    answer_of={p.prompt_hash: str(self.task.doc_to_target(p.doc)) for p in questions},
                    hash_text=prompt_hash,
                    target_delimiter=str(self.config.get("target_delimiter", " ")),
                    fewshot_delimiter=str(self.config.get("fewshot_delimiter", "\n\n")),
                )
                questions = self.workload(questions, transcript)
            self._cache[key] = questions
        return self._cache[key]

    def _prompt(self, task, inst, doc_id: int) -> Prompt:
        context, gen_kwargs = inst.args
        target = str(task.doc_to_target(inst.doc))
        doc = inst.doc
        return Prompt(
            doc_id=int(doc_id),
            text=context,
            prompt_hash=prompt_hash(context),
            question=str(doc["question"] if self.generated else task.doc_to_text(doc)),
            target=self.spec.target(target) if self.spec else target.strip(),
            stop=tuple(gen_kwargs.get("until", ())),
            doc=doc,
            answer_char_offset=doc.get("answer_char_offset"),
            answer_position=doc.get("position"),
        )

    def score(self, prompt: Prompt, response: str) -> Score:
        """Apply the task's own filters and its first metric to one response."""
        from lm_eval.api.instance import Instance

        inst = Instance(request_type=GENERATE, doc=prompt.doc, arguments=(prompt.text, {}), idx=0)
        inst.resps = [response]
        answers, correct = {}, {}
        for filter_name, metric in self.metrics:
            ensemble = self.filters[filter_name]
            ensemble.apply([inst])
            answer = inst.filtered_resps[ensemble.name]
            answers[metric] = None if answer in (None, INVALID) else str(answer)
            correct[metric] = self._right(prompt, answer)
        return Score(answers, correct)

    def _right(self, prompt: Prompt, answer) -> bool:
        """Whether the task's first metric scores `answer` as right; a graded metric cannot gate pairs."""
        results = self.task.process_results(prompt.doc, [answer])
        name, value = next(iter(results.items()))
        if value not in (0, 1):
            raise BadInput(f"task {self.name!r}: metric {name} scored {value!r}; evalctl pairs right/wrong answers (a 0/1 metric)")
        return bool(value)


def _reuse_compiled_templates() -> None:
    """lm-eval renders each doc's text and target with `env.from_string(template)`, which compiles the
    template anew every time (about 2 ms: most of a GSM8K sweep's own time per request, measured by
    scripts/bench_client.py --whole). A compiled jinja2 template is immutable: keep one per source."""
    from lm_eval import utils

    if getattr(utils.env.from_string, "reuses_compiled", False):
        return
    compile_ = utils.env.from_string
    compiled = functools.cache(compile_)

    def from_string(source, *args, **kwargs):
        if args or kwargs or not isinstance(source, str):
            return compile_(source, *args, **kwargs)
        return compiled(source)

    from_string.reuses_compiled = True
    utils.env.from_string = from_string


def task_of(config: SweepConfig, fewshot: str | None = None) -> LmEvalTask:
    """The task a sweep config names, with its data source, few-shot mode (default: the config's) and seeds."""
    return LmEvalTask(
        config.task,
        include_path=config.include_path,
        data_dir=resolved_data_dir(config.task, config.data_dir),
        fewshot=fewshot or config.fewshot,
        seed=config.generation.seed,
        limit_order=config.limit_order,
        limit_seed=config.limit_seed,
        workload=functools.partial(WORKLOADS.get(config.workload).build, config=config) if config.workload else None,
    )
