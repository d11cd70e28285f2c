from __future__ import annotations

from frames import sample_frame

from evalctl.analysis.flips import flipped_questions


def test_flips_pair_by_question_and_cell_and_skip_errors():
    off = sample_frame([
        {"cache": "off", "doc_id": 0, "prompt_hash": "a"},
        {"cache": "off", "doc_id": 1, "prompt_hash": "b", "strict_correct": False, "strict_answer": "7"},
        {"cache": "off", "doc_id": 2, "prompt_hash": "c"},
        {"cache": "off", "doc_id": 3, "prompt_hash": "d"},
        {"cache": "off", "doc_id": 4, "prompt_hash": "e", "shots": 2},
    ])  # fmt: skip
    on = sample_frame([
        {"cache": "on", "doc_id": 0, "prompt_hash": "a", "strict_correct": False, "strict_answer": "5", "response": "so 5"},
        {"cache": "on", "doc_id": 1, "prompt_hash": "b"},
        {"cache": "on", "doc_id": 2, "prompt_hash": "c"},  # same outcome: not a flip
        {"cache": "on", "doc_id": 3, "prompt_hash": "d", "error": "timeout", "strict_correct": None},  # no answer: not a flip
        {"cache": "on", "doc_id": 4, "prompt_hash": "e", "shots": 8, "strict_correct": False},  # other cell: unpaired
    ])  # fmt: skip
    flips = flipped_questions(off, on, ["profile", "variant", "shots", "pass_index"])
    assert list(flips["doc_id"]) == [0, 1]
    assert list(flips["direction"]) == ["right->wrong", "wrong->right"]
    first = flips.iloc[0]
    assert (first["reference_answer"], first["candidate_answer"], first["candidate_response"], first["target"]) == ("1", "5", "so 5", "1")


def test_flips_use_the_chosen_metric():
    ref = sample_frame([{"doc_id": 0, "strict_correct": True, "flexible_correct": True}])
    cand = sample_frame([{"doc_id": 0, "strict_correct": False, "flexible_correct": True}])
    assert len(flipped_questions(ref, cand, ["shots"], metric="strict")) == 1
    assert flipped_questions(ref, cand, ["shots"], metric="flexible").empty
