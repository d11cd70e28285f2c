"""prefix-recall: generated records and questions, through lm-eval's task machinery and filters."""

from __future__ import annotations

import os
from collections import Counter

import pytest

from evalctl.config import config_from_dict
from evalctl.errors import ConfigError
from evalctl.tasks.lmeval import LmEvalTask
from evalctl.tasks.prefix_recall.generate import RECORD, documents, position_bin, spread_order
from evalctl.tasks.registry import resolved_data_dir


def test_spread_order_is_a_permutation_whose_every_start_is_spread():
    for n in (1, 2, 3, 7, 96, 100):
        order = spread_order(n)
        assert sorted(order) == list(range(n))
    order = spread_order(96)
    for m in (3, 6, 12, 48):
        thirds = Counter(position_bin(i, 96) for i in order[:m])
        assert thirds == {"start": m // 3, "middle": m // 3, "end": m // 3}, m


def test_shared_mode_one_prefix_distinct_keys_answers_in_it():
    docs = documents(30, "shared", seed=7)
    assert len(docs) == 30
    prefix = os.path.commonprefix([d["prompt"] for d in docs])
    keys = [d["question"].rstrip(":") for d in docs]
    assert len(set(keys)) == 30  # every question asks a different record
    for d in docs:
        key = d["question"].rstrip(":")
        line = RECORD.format(key=key, value=d["value"])
        assert prefix.count(f"\n{key}: ") == 1 and line in prefix  # the answer is in the shared prefix, once
        assert d["prompt"][d["answer_char_offset"] :].startswith(d["value"] + "\n")
        assert d["prompt"].index(line) < d["answer_char_offset"] < d["prompt"].index(line) + len(line)
        assert d["position"] == position_bin(d["record_index"], 30)
        assert d["prompt"].endswith(f"\n{key}:")


def test_same_seed_same_prompts_other_seed_other_prompts():
    assert documents(20, "shared", 1) == documents(20, "shared", 1)
    assert documents(20, "sampled", 1) == documents(20, "sampled", 1)
    assert documents(20, "shared", 1)[0]["prompt"] != documents(20, "shared", 2)[0]["prompt"]


def test_sampled_mode_draws_a_prefix_per_question():
    docs = documents(20, "sampled", 3)
    prefixes = {d["prompt"][: d["prompt"].rindex("\n\n")] for d in docs}
    assert len(prefixes) == 20
    for d in docs:
        assert d["prompt"][d["answer_char_offset"] :].startswith(d["value"] + "\n")
    assert [d["record_index"] for d in docs] == spread_order(20)  # same positions asked as in shared mode


def test_sampled_mode_asks_as_many_questions_as_the_cell_wants_each_its_own_list():
    docs = documents(4, "sampled", 3, questions=10)
    assert len({d["prompt"] for d in docs}) == 10 and docs[:4] == documents(4, "sampled", 3)  # the first are unchanged
    assert [d["record_index"] for d in docs] == (spread_order(4) * 3)[:10]  # positions cycle, spread
    prompts = LmEvalTask("prefix-recall", data_dir=None, fewshot="sampled", seed=1234).prompts(4, limit=10)
    assert [p.text for p in prompts] == [d["prompt"] for d in documents(4, "sampled", 1234, questions=10)]


def test_shared_mode_opens_another_list_for_more_questions_than_records_asking_none_twice():
    docs = documents(4, "shared", 3, questions=10)
    assert len(docs) == 10 and docs[:4] == documents(4, "shared", 3)  # the first list unchanged
    lists = [d["prompt"][: d["prompt"].rindex("\n\n")] for d in docs]
    assert [lists.index(text) for text in lists] == [0] * 4 + [4] * 4 + [8] * 2  # question j asks list j // 4
    assert len({(text, d["record_index"]) for text, d in zip(lists, docs)}) == 10
    assert [d["record_index"] for d in docs] == (spread_order(4) * 3)[:10]
    prompts = LmEvalTask("prefix-recall", data_dir=None, fewshot="shared", seed=1234).prompts(4, limit=10)
    assert [p.text for p in prompts] == [d["prompt"] for d in documents(4, "shared", 1234, questions=10)]  # the task asks the cell's limit


@pytest.fixture(scope="module")
def recall():
    return LmEvalTask("prefix-recall", data_dir=None, fewshot="shared", seed=1234)


def test_shots_count_records_and_prompts_are_the_generated_ones(recall):
    prompts = recall.prompts(12, limit=6)
    docs = documents(12, "shared", 1234)[:6]
    assert [p.text for p in prompts] == [d["prompt"] for d in docs]  # lm-eval's template adds nothing
    assert [p.doc_id for p in prompts] == list(range(6))
    assert [p.target for p in prompts] == [d["value"] for d in docs]
    assert [p.answer_position for p in prompts] == [d["position"] for d in docs]
    assert prompts[0].stop == ("\n",)
    assert len(recall.prompts(12, limit=None)) == 12  # one question per record
    assert recall.prompts(24, limit=3)[0].text != prompts[0].text
    again = LmEvalTask("prefix-recall", data_dir=None, fewshot="shared", seed=1234).prompts(12, limit=6)
    assert [p.prompt_hash for p in again] == [p.prompt_hash for p in prompts]
    sampled = LmEvalTask("prefix-recall", data_dir=None, fewshot="sampled", seed=1234).prompts(12, limit=3)
    assert [p.text for p in sampled] == [d["prompt"] for d in documents(12, "sampled", 1234)[:3]]


def test_scored_by_the_tasks_own_filters(recall):
    prompt = recall.prompts(12, limit=1)[0]
    value = prompt.target
    cases = {
        f" {value}": (True, True),
        f"{value}.": (True, True),
        f" {value} and more": (True, True),
        f" the code is {value}": (False, True),  # strict wants the value first
        f" {int(value) + 1}": (False, False),
        " unknown": (False, False),
    }
    for response, (strict, flexible) in cases.items():
        score = recall.score(prompt, response)
        assert (score.correct["strict"], score.correct["flexible"]) == (strict, flexible), response
    assert recall.score(prompt, " unknown").answers["strict"] is None  # invalid, counted apart from wrong


def test_zero_records_is_refused():
    with pytest.raises(ConfigError, match="records as shots"):
        config_from_dict({"model": "m", "task": "prefix-recall", "shots": [0, 8], "servers": [{"name": "a", "model_path": "x"}]}, None, "t")
    with pytest.raises(ConfigError, match="records as shots"):
        LmEvalTask("prefix-recall", data_dir=None, fewshot="shared").prompts(0, limit=1)


def test_generated_task_reads_no_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALCTL_DATA_DIR", str(tmp_path / "missing"))
    cfg = config_from_dict({"model": "m", "task": "prefix-recall", "shots": [8], "servers": [{"name": "a", "model_path": "x"}]}, None, "t")
    assert resolved_data_dir(cfg.task, cfg.data_dir) is None  # no GSM8K fingerprint in a recall run's manifest
