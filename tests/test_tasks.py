from __future__ import annotations

import json

import pytest

from evalctl.datasets import packaged_data_dir
from evalctl.errors import BadInput, ConfigError
from evalctl.tasks.lmeval import LmEvalTask


@pytest.fixture(scope="module")
def shared_task(request):
    return LmEvalTask("gsm8k", data_dir=packaged_data_dir("gsm8k"), fewshot="shared", limit_order="head")


def test_limit_keeps_a_seeded_random_sample_the_same_in_every_cell(data_dir):
    task = LmEvalTask("gsm8k", data_dir=data_dir, fewshot="shared")
    ids = [p.doc_id for p in task.prompts(2, limit=6)]
    assert ids == sorted(ids) and len(set(ids)) == 6 and ids != list(range(6))
    assert [p.doc_id for p in task.prompts(0, limit=6)] == ids  # every shot count asks the same questions
    assert [p.doc_id for p in LmEvalTask("gsm8k", data_dir=data_dir, fewshot="shared").prompts(0, limit=6)] == ids
    with open(data_dir / "test.jsonl") as fh:
        questions = [json.loads(line)["question"] for line in fh]
    assert all(questions[p.doc_id] in p.question for p in task.prompts(0, limit=6))  # ids are test indices
    other = LmEvalTask("gsm8k", data_dir=data_dir, fewshot="shared", limit_seed=7)
    assert [p.doc_id for p in other.prompts(0, limit=6)] != ids
    assert task.questions(None) is None and task.questions(len(questions) + 5) is None


def train_questions(data_dir, k):
    with open(data_dir / "train.jsonl") as fh:
        return [json.loads(next(fh))["question"] for _ in range(k)]


def test_shared_mode_uses_first_k_train_examples_as_one_prefix(shared_task, data_dir):
    prompts = shared_task.prompts(3, limit=4)
    assert [p.doc_id for p in prompts] == [0, 1, 2, 3]
    first3 = train_questions(data_dir, 3)
    for p in prompts:
        # exemplars in train order, then the scored test question last
        positions = [p.text.index(q) for q in first3]
        assert positions == sorted(positions)
        assert p.text.rstrip().endswith(p.question.rstrip())
    prefix = prompts[0].text[: prompts[0].text.index(prompts[0].question)]
    assert all(p.text.startswith(prefix) for p in prompts)
    assert len({p.prompt_hash for p in prompts}) == 4


def test_scored_questions_come_from_test_not_train(shared_task, data_dir):
    with open(data_dir / "test.jsonl") as fh:
        first_test = json.loads(next(fh))
    prompt = shared_task.prompts(2, limit=1)[0]
    assert first_test["question"] in prompt.question
    assert prompt.target == "18"
    assert first_test["question"] not in prompt.text[: prompt.text.index(prompt.question)]


def test_sampled_mode_draws_different_exemplars_per_question_reproducibly(data_dir):
    task = LmEvalTask("gsm8k", data_dir=data_dir, fewshot="sampled")
    a = task.prompts(2, limit=3)
    prefixes = {p.text[: p.text.index(p.question)] for p in a}
    assert len(prefixes) > 1
    again = LmEvalTask("gsm8k", data_dir=data_dir, fewshot="sampled").prompts(2, limit=3)
    assert [p.text for p in a] == [p.text for p in again]  # pairing across cells needs this


def test_zero_shot_is_just_the_question(shared_task):
    prompt = shared_task.prompts(0, limit=1)[0]
    assert prompt.text == prompt.question


RESPONSES = [
    "Janet has 16 - 3 - 4 = 9 eggs, 9 * 2 = 18.\n#### 18",
    "The answer is 18 dollars",
    "#### 1,8",
    "She makes $18.",
    "#### 17",
    "no number at all",
    "12 then 18 then 20",
]


def test_scoring_matches_lm_eval_pipeline(shared_task):
    """Per-response scoring must equal lm-eval's own filters + metric over the same responses."""
    task = shared_task.task
    prompt = shared_task.prompts(1, limit=1)[0]
    task.build_all_requests(limit=1, rank=0, world_size=1)
    for response in RESPONSES:
        inst = task.instances[0]
        inst.resps = [response]
        inst.filtered_resps = {}
        task.apply_filters()
        expected = {name: task.process_results(inst.doc, [ans])["exact_match"] for name, ans in inst.filtered_resps.items()}
        score = shared_task.score(prompt, response)
        assert score.correct == {"strict": bool(expected["strict-match"]), "flexible": bool(expected["flexible-extract"])}, response
    assert shared_task.score(prompt, RESPONSES[0]).answers["strict"] == "18"
    assert shared_task.score(prompt, RESPONSES[5]).answers["strict"] is None  # invalid, not wrong-but-valid


def test_unknown_task_and_bad_data_dir(tmp_path):
    with pytest.raises(BadInput, match="unknown task 'no-such-task' in .*; known: gsm8k, prefix-recall"):
        LmEvalTask("no-such-task", data_dir=tmp_path, fewshot="shared", include_path=tmp_path)
    with pytest.raises(BadInput, match="'mmlu' is an lm-eval group of tasks"):
        LmEvalTask("mmlu", data_dir=tmp_path, fewshot="shared")
    with pytest.raises(ConfigError, match="has no train.jsonl"):
        LmEvalTask("gsm8k", data_dir=tmp_path, fewshot="shared")
    with pytest.raises(ConfigError, match="does not exist"):
        LmEvalTask("gsm8k", data_dir=tmp_path / "missing", fewshot="shared")
