"""lm-eval's task machinery: prompts for each shot count, and scoring with its filters.

Tasks:
- `gsm8k`: lm-eval's own; shots are train exemplars before each test question.
- `prefix-recall`: evalctl's (`prefix_recall/`), generated from the seed; shots are the
  records of the prefix, and every answer must be read back from them.

Few-shot modes:
- `shared`: one prefix for every question of a cell (GSM8K: the first k train examples,
  what a prefix cache is for, and what SGLang's own GSM8K check does; prefix-recall: one
  list of k records, questions about keys spread over its start, middle and end);
- `sampled`: a different prefix per question (GSM8K: lm-eval's default sampler).
Exemplars always come from the train split; scored questions from test.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

import numpy as np

from evalctl.config import GENERATED_TASKS, ConfigError, TaskName
from evalctl.records import AnswerPosition
from evalctl.tasks.data import local_dataset_overrides

TASKS = get_args(TaskName)
EVALCTL_TASKS_DIR = Path(__file__).resolve().parent


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


@dataclass(frozen=True)
class Score:
    strict_answer: str | None
    flexible_answer: str | None
    strict_correct: bool
    flexible_correct: bool


def prompt_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class LmEvalTask:
    """One lm-eval generation task with evalctl's data source and few-shot mode."""

    def __init__(
        self, name: str, *, data_dir: Path | None, fewshot: str, seed: int = 1234, limit_order: str = "shuffled", limit_seed: int = 1234
    ):
        if name not in TASKS:
            raise ConfigError(f"unknown task {name!r}; supported: {', '.join(TASKS)}")
        self.name = name
        self.generated = name in GENERATED_TASKS
        self.data_source = None if self.generated else data_dir  # generated tasks read no data dir
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        if self.data_source is not None or self.generated:
            # No hub look-ups at all when the data are local.
            os.environ["HF_DATASETS_OFFLINE"] = "1"
        logging.getLogger("lm_eval").setLevel(logging.ERROR)
        import lm_eval
        from lm_eval.filters import build_filter_ensemble
        from lm_eval.tasks import TaskManager
        from lm_eval.tasks._yaml_loader import load_yaml

        if self.generated:
            tasks_dir = EVALCTL_TASKS_DIR / name.replace("-", "_")
        else:
            tasks_dir = Path(lm_eval.__file__).parent / "tasks" / name
        # Index only this task's folder: scanning every lm-eval task takes seconds.
        manager = TaskManager(include_defaults=False, include_path=str(tasks_dir))
        # Loaded in full: prefix-recall's `custom_dataset` is a function of its folder.
        config = copy.deepcopy(load_yaml(manager.task_index[name].yaml_path, resolve_func=True))
        config.pop("tag", None)
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
        self.filters = [
            build_filter_ensemble(f["name"], [(c["function"], {k: v for k, v in c.items() if k != "function"}) for c in f["filter"]])
            for f in config["filter_list"]
        ]
        self.seed = seed
        self.limit_order, self.limit_seed = limit_order, limit_seed
        self._cache: dict[tuple[int, int | None], list[Prompt]] = {}
        # The fewest shots that still make a prompt: a generated prefix needs a record to ask about.
        self.min_shots = 1 if self.generated else 0

    def _configurable(self, config: dict):
        from lm_eval.api.task import ConfigurableTask

        try:
            return ConfigurableTask(config=config)
        except Exception as exc:  # lm-eval/datasets raise many types for unreachable data
            where = self.data_source or config.get("dataset_path")
            raise ConfigError(f"cannot load task {self.name!r} data from {where}: {exc}") from exc

    def _task_at(self, shots: int):
        """The lm-eval task object that builds the prompts at `shots`."""
        if not self.generated:
            self.task.set_config(key="num_fewshot", value=shots)
            return self.task
        if shots < 1:
            raise ConfigError(f"task {self.name!r} counts records as shots: every shot count must be >= 1, got {shots}")
        task = self._configurable({**self.config, "metadata": {**self.config["metadata"], "records": shots}})
        task.set_config(key="num_fewshot", value=0)  # the records are the prefix; no exemplars on top
        return task

    def questions(self, limit: int | None) -> list[int] | None:
        """The test questions (doc ids, ascending) `limit` keeps; None for all of them.

        `shuffled`: the first `limit` of a permutation seeded by `limit_seed`, a random sample
        of the test split, the same in every cell and run with that seed. `head`: the first
        `limit`, which is what lm-eval's own --limit scores (kept to compare with it).
        """
        total = len(self.task.eval_docs)
        if limit is None or limit >= total:
            return None
        if self.limit_order == "head":
            return list(range(limit))
        return sorted(int(i) for i in np.random.default_rng(self.limit_seed).permutation(total)[:limit])

    def in_send_order(self, prompts: list[Prompt]) -> list[Prompt]:
        """`prompts` in the order of the `limit_seed` permutation: any prefix is a random sample.

        The sequential gate sends in this order, the same in every cell, so cells stopped at the
        same look hold the same questions and stay paired. A fixed test split follows the
        permutation `questions` takes its sample from; a generated task, whose questions are
        numbered per shot count, a permutation of those numbers.
        """
        total = max(p.doc_id for p in prompts) + 1 if self.generated else len(self.task.eval_docs)
        rank = np.argsort(np.random.default_rng(self.limit_seed).permutation(total))
        return sorted(prompts, key=lambda p: rank[p.doc_id])

    def prompts(self, shots: int, limit: int | None) -> list[Prompt]:
        """The scored prompts at `shots`; identical across cache modes and variants."""
        key = (shots, limit)
        if key not in self._cache:
            task = self._task_at(shots)
            task.set_fewshot_seed(self.seed)  # same exemplars in every cell: runs stay paired
            # A generated task already orders its questions over the prefix (start/middle/end in
            # turn), so its first `limit` are the sample; a fixed test split is subsampled by seed.
            ids = None if self.generated else self.questions(limit)
            task.build_all_requests(limit=limit if self.generated else None, samples=ids, rank=0, world_size=1)
            # lm-eval numbers a sample 0..k-1 in test order; the doc id must be the test index.
            self._cache[key] = [self._prompt(task, inst, ids[inst.doc_id] if ids else inst.doc_id) for inst in task.instances]
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
            target=target.split("####")[-1].strip(),
            stop=tuple(gen_kwargs.get("until", ())),
            doc=doc,
            answer_char_offset=doc.get("answer_char_offset"),
            answer_position=doc.get("position"),
        )

    def score(self, prompt: Prompt, response: str) -> Score:
        """Apply the task's own filters and metric to one response."""
        from lm_eval.api.instance import Instance

        inst = Instance(request_type="generate_until", doc=prompt.doc, arguments=(prompt.text, {}), idx=0)
        inst.resps = [response]
        answers, correct = {}, {}
        for ensemble in self.filters:
            ensemble.apply([inst])
            answer = inst.filtered_resps[ensemble.name]
            answers[ensemble.name] = answer
            correct[ensemble.name] = bool(self.task.process_results(prompt.doc, [answer])["exact_match"])
        strict, flexible = answers.get("strict-match"), answers.get("flexible-extract")
        return Score(
            strict_answer=None if strict in (None, "[invalid]") else str(strict),
            flexible_answer=None if flexible in (None, "[invalid]") else str(flexible),
            strict_correct=correct.get("strict-match", False),
            flexible_correct=correct.get("flexible-extract", False),
        )
