"""Accuracy by answer position (prefix-recall), on a hand-built frame."""

from __future__ import annotations

from analysis.frames import sample_frame

from evalctl.analysis.accuracy import accuracy_by_position
from evalctl.report.terminal import accuracy_view


def recall_frame():
    """Cache off: 4/4 right at every position. Cache on: start 1/4, middle 2/4, end 4/4, across two shot counts.

    Plus a row with a request error (not scored) and a GSM8K-style row without a position (left out).
    """
    rows = []
    right_on = {"start": 1, "middle": 2, "end": 4}
    for cache in ("off", "on"):
        for position, n_right in right_on.items():
            for doc in range(4):
                right = cache == "off" or doc < n_right
                shots = 96 if doc % 2 else 384
                rows.append(
                    dict(cache=cache, shots=shots, doc_id=doc, answer_position=position, strict_correct=right, flexible_correct=right)
                )
    rows.append(dict(cache="on", shots=96, doc_id=9, answer_position="start", error="timeout", error_kind="timeout", strict_correct=None))
    rows.append(dict(cache="on", shots=8, doc_id=10, answer_position=None, strict_correct=False))
    return sample_frame(rows)


def test_accuracy_by_position_reads_right():
    table = accuracy_by_position(recall_frame())
    assert list(table["answer_position"]) == ["start", "start", "middle", "middle", "end", "end"]  # prompt order, not alphabetical
    assert list(table["cache"]) == ["off", "on"] * 3
    got = {(r.answer_position, r.cache): (r.n, r.errors, r.strict_acc) for r in table.itertuples()}
    assert got[("start", "on")] == (4, 1, 0.25)  # the errored request is counted apart, not as wrong
    assert got[("middle", "on")] == (4, 0, 0.5)
    assert got[("end", "on")] == (4, 0, 1.0)
    assert all(got[(p, "off")] == (4, 0, 1.0) for p in ("start", "middle", "end"))
    start_on = table[(table.answer_position == "start") & (table.cache == "on")].iloc[0]
    assert start_on.strict_lo < 0.25 < start_on.strict_hi  # Wilson interval around the estimate
    assert "strict" in accuracy_view(table).columns


def test_tasks_without_positions_give_an_empty_table():
    frame = sample_frame([dict(doc_id=0), dict(doc_id=1, cache="off")])
    table = accuracy_by_position(frame)
    assert table.empty and "answer_position" in table.columns
    assert accuracy_by_position(frame.drop(columns=["answer_position"])).empty  # records written before the column existed
