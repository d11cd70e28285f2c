from __future__ import annotations

import pandas as pd
import pytest
from frames import sample_frame, sweep_frame

from evalctl.analysis.pairing import align_runs, paired_table, within_run
from evalctl.errors import BadInput


def test_cache_pairs_count_flips_per_cell_and_label_the_candidate_cell():
    df = sweep_frame(n=50, shots=(8, 16), to_wrong={16: {0, 1, 2}}, to_right={16: {45}})
    table = paired_table(within_run(df))
    assert list(table["comparison"].unique()) == ["cache on vs off"]
    assert set(table["cache"]) == {"on"}
    row = table[table["shots"] == 16].iloc[0]
    assert (row.n, row.b, row.c) == (50, 3, 1)
    assert row.acc_drop == pytest.approx(2 / 50)
    assert row.ref_acc - row.cand_acc == pytest.approx(row.acc_drop)
    assert row.ref_lo < row.ref_acc < row.ref_hi
    assert row.p_value == pytest.approx(5 / 16)  # P(X >= 3 | 4, 1/2)
    clean = table[table["shots"] == 8].iloc[0]
    assert (clean.b, clean.c, clean.p_value) == (0, 0, 1.0)


def test_pairs_need_the_same_prompt_and_count_candidate_request_errors_as_wrong():
    on = [{"cache": "on", "doc_id": d, "prompt_hash": f"h{d}", "strict_correct": False} for d in range(4)]
    off = [{"cache": "off", "doc_id": d, "prompt_hash": f"h{d}" if d else "other", "strict_correct": True} for d in range(4)]
    on[1] = {**on[1], "error": "timeout", "error_kind": "timeout", "strict_correct": None}
    row = paired_table(within_run(sample_frame(on + off))).iloc[0]
    assert (row.n, row.b, row.cand_errors) == (3, 3, 1)  # doc 0 has another prompt, doc 1 errored: a loss


def test_variant_and_pass_comparisons_use_the_baseline_and_pass_one():
    rows = [
        {"variant": v, "pass_index": p, "doc_id": d, "prompt_hash": f"h{d}", "strict_correct": not (v == "patched" and d < 2)}
        for v in ("base", "patched")
        for p in (1, 2)
        for d in range(10)
    ]
    comps = within_run(sample_frame(rows), baseline_variant="base")
    assert {c.kind for c in comps} == {"variant", "pass"}
    table = paired_table(comps)
    variant = table[table["kind"] == "variant"]
    assert set(variant["variant"]) == {"patched"} and (variant["b"] == 2).all()
    passes = table[table["kind"] == "pass"]
    assert set(passes["pass_index"]) == {2} and (passes["b"] == 0).all()


def test_each_profile_is_paired_with_the_first_profile_question_by_question():
    # Two engines on the same questions (the cross-engine sweep): the second profile is judged
    # against the reference the config names first, not the alphabetically first.
    rows = [
        {"profile": p, "doc_id": d, "prompt_hash": f"h{d}", "strict_correct": not (p == "cpu-vllm" and d < 3) and not (p == "a" and d == 9)}
        for p in ("cpu", "cpu-vllm", "a")
        for d in range(10)
    ]
    comps = within_run(sample_frame(rows), baseline_profile="cpu")
    assert [(c.kind, c.name) for c in comps] == [("profile", "profile a vs cpu"), ("profile", "profile cpu-vllm vs cpu")]
    table = paired_table(comps).set_index("profile")
    assert (table.loc["cpu-vllm", "b"], table.loc["cpu-vllm", "c"], table.loc["a", "b"]) == (3, 0, 1)


def test_runs_without_common_questions_raise():
    base = sweep_frame(n=5, shots=(8,))
    cand = base.assign(prompt_hash="different")
    with pytest.raises(BadInput, match="share no questions"):
        align_runs(base, cand)
    assert len(align_runs(base, base)) == len(base)


def test_each_concurrency_level_is_paired_with_the_lowest_level_question_by_question():
    base = sweep_frame(n=20, shots=(8,))
    leaked = {0, 1, 2}  # at 32 in flight, three answers went wrong
    levels = [base.assign(concurrency=level) for level in (1, 8)]
    levels.append(base.assign(concurrency=32, strict_correct=[ok and d not in leaked for ok, d in zip(base.strict_correct, base.doc_id)]))
    table = paired_table(within_run(pd.concat(levels, ignore_index=True)))
    by_level = table[table["kind"] == "concurrency"].set_index(["concurrency", "cache"])
    assert sorted(table.loc[table["kind"] == "concurrency", "comparison"].unique()) == ["concurrency 32 vs 1", "concurrency 8 vs 1"]
    assert set(by_level.reference) == {"concurrency 1"} and 1 not in by_level.index.get_level_values(0)
    assert by_level.loc[(8, "on"), ["n", "b", "c"]].tolist() == [20, 0, 0]
    assert by_level.loc[(32, "on"), ["n", "b", "c"]].tolist() == by_level.loc[(32, "off"), ["n", "b", "c"]].tolist() == [20, 3, 0]
    # cache on vs off stays within a level
    assert set(table.loc[table["kind"] == "cache", "concurrency"]) == {1, 8, 32}
