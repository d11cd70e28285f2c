"""lm-eval's task machinery: prompts for each shot count, and scoring with its filters.

Few-shot modes:
- `shared`: the first k train examples for every question (one shared prefix,
  what a prefix cache is for, and what SGLang's own GSM8K check does);
- `sampled`: lm-eval's default, different random exemplars per question.
Exemplars always come from the train split; scored questions from test.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evalctl.config import ConfigError
from evalctl.tasks.data import local_dataset_overrides

TASKS = ("gsm8k",)


@dataclass(frozen=True)
class Prompt:
    doc_id: int
    text: str
    prompt_hash: str
    question: str
    target: str
    stop: tuple[str, ...]
    doc: dict


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
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        if data_dir is not None:
            # No hub look-ups at all when the data are local.
            os.environ["HF_DATASETS_OFFLINE"] = "1"
        logging.getLogger("lm_eval").setLevel(logging.ERROR)
        import lm_eval
        from lm_eval.api.task import ConfigurableTask
        from lm_eval.filters import build_filter_ensemble
        from lm_eval.tasks import TaskManager

        tasks_dir = Path(lm_eval.__file__).parent / "tasks" / name
        # Index only this task's folder: scanning every lm-eval task takes seconds.
        manager = TaskManager(include_defaults=False, include_path=str(tasks_dir))
        config = copy.deepcopy(manager.task_index[name].cfg)
        config.pop("tag", None)
        if data_dir is not None:
            config.update(local_dataset_overrides(data_dir))
        if fewshot == "shared":
            config["fewshot_config"] = {"sampler": "first_n"}
        try:
            self.task = ConfigurableTask(config=config)
        except Exception as exc:  # lm-eval/datasets raise many types for unreachable data
            where = data_dir or config.get("dataset_path")
            raise ConfigError(f"cannot load task {name!r} data from {where}: {exc}") from exc
        self.filters = [
            build_filter_ensemble(f["name"], [(c["function"], {k: v for k, v in c.items() if k != "function"}) for c in f["filter"]])
            for f in config["filter_list"]
        ]
        self.seed = seed
        self.limit_order, self.limit_seed = limit_order, limit_seed
        self._cache: dict[tuple[int, int | None], list[Prompt]] = {}

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

    def prompts(self, shots: int, limit: int | None) -> list[Prompt]:
        """The scored prompts at `shots`; identical across cache modes and variants."""
        key = (shots, limit)
        if key not in self._cache:
            self.task.set_config(key="num_fewshot", value=shots)
            self.task.set_fewshot_seed(self.seed)  # same exemplars in every cell: runs stay paired
            ids = self.questions(limit)
            self.task.build_all_requests(samples=ids, rank=0, world_size=1)
            # lm-eval numbers a sample 0..k-1 in test order; the doc id must be the test index.
            self._cache[key] = [self._prompt(inst, ids[inst.doc_id] if ids else inst.doc_id) for inst in self.task.instances]
        return self._cache[key]

    def _prompt(self, inst, doc_id: int) -> Prompt:
        context, gen_kwargs = inst.args
        target = str(self.task.doc_to_target(inst.doc))
        return Prompt(
            doc_id=int(doc_id),
            text=context,
            prompt_hash=prompt_hash(context),
            question=str(self.task.doc_to_text(inst.doc)),
            target=target.split("####")[-1].strip(),
            stop=tuple(gen_kwargs.get("until", ())),
            doc=inst.doc,
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
