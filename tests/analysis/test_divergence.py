"""The logprob rungs (`analysis.divergence`, checks `exact` and `divergence`) on hand-built conversation runs.

A conversation cell of 40 returns and 40 extensions, cold, warm and the A/A replica (no reference for
the logprob rungs), each answer 8 tokens with their logprobs. The figures are llama.cpp #24411's: a healthy warm path drifts by up to
0.07 nats, a wrongly restored checkpoint moves a return's logprobs by 0.35-0.64.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from frames import manifest_for, sample_frame

from evalctl.analysis.divergence import compare_tokens, exceedance_p
from evalctl.analysis.gate import GatePolicy, evaluate
from evalctl.client import TokenLogprob
from evalctl.records import read_logprobs, stored_logprobs
from evalctl.runs import Run

N = 40
POLICY = GatePolicy(metric="agreement", max_throughput_drop=None)


def tokens(shift: float = 0.0, flip_at: int | None = None) -> tuple[TokenLogprob, ...]:
    """Eight generated tokens, each with a top 3; `shift` moves every logprob, `flip_at` chooses another token there."""
    out = []
    for i in range(8):
        top = {f"t{i}": -0.2 + shift, f"u{i}": -1.9 - shift, f"v{i}": -3.0}
        chosen = f"u{i}" if i == flip_at else f"t{i}"
        out.append(TokenLogprob(chosen, top[chosen], top))
    return tuple(out)


def run_with(
    warm_shift: dict[int, float], extend_shift: float = 0.0, replica: bool = True, cached: int = 400, flipped: frozenset = frozenset()
) -> Run:
    """Returns (docs 0..N-1, rewinds; `cached` tokens reported warm) and extensions (docs N..2N-1, 400 cached); the warm
    side shifted by `warm_shift[doc]` (returns) or `extend_shift` (a small drift on every second extension); the warm
    answers of `flipped` docs choose another token at position 3 (a near tie when their shift is small)."""
    rows = []
    for cache in ("off", "on"):
        for doc in range(2 * N):
            kind = "rewind" if doc < N else "extend"
            shift = (warm_shift.get(doc, 0.0) if doc < N else extend_shift * (doc % 2)) if cache == "on" else 0.0
            moved = cache == "on" and doc in flipped
            rows.append(
                dict(cache=cache, doc_id=doc, prompt_hash=f"h{doc}", response=f"#### {doc}{'x' if moved else ''}", conversation=doc % 10,
                     turn=3, turn_kind=kind, prompt_tokens=600, cached_tokens=(cached if doc < N else 400) if cache == "on" else 0,
                     logprobs=stored_logprobs(tokens(shift, flip_at=3 if moved else None)))
            )  # fmt: skip
    samples = sample_frame(rows)
    aa = samples[samples["cache"] == "off"] if replica else samples.iloc[:0]
    return Run(Path("r"), manifest_for(samples), samples, aa)


def rung(run: Run, kind: str):
    result = evaluate(run, POLICY)
    return result, [c for c in result.checks if c.kind == kind]


def test_a_pair_reports_its_first_divergence_and_the_largest_logprob_change():
    pair = compare_tokens(tokens(0.3, flip_at=2), tokens())
    assert (pair.exact, pair.first_divergence, pair.positions) == (False, 2, 3)
    assert pair.divergence == pytest.approx(0.3)
    assert compare_tokens(tokens(), tokens()).exact
    # An unlisted chosen token counts at most the other side's least listed logprob: a lower bound.
    cold = (TokenLogprob("a", -0.1, {"a": -0.1, "b": -2.5}),)
    warm = (TokenLogprob("c", -0.3, {"c": -0.3, "d": -1.0}),)
    assert compare_tokens(warm, cold).divergence == pytest.approx(2.2)  # c: -0.3 warm, at most -2.5 cold


def test_logprobs_survive_the_records_round_trip():
    stored = stored_logprobs(tokens(0.1))
    assert read_logprobs(stored) == tokens(0.1) and read_logprobs(None) is None


def test_exceedance_probability_is_the_chance_the_top_k_are_all_judged():
    assert exceedance_p(0, 40, 60) == 1.0
    assert exceedance_p(1, 40, 60) == pytest.approx(0.4)
    assert exceedance_p(2, 40, 60) == pytest.approx(40 * 39 / (100 * 99))


def test_a_deterministic_engine_is_judged_by_the_exact_rung():
    result, (exact,) = rung(run_with({}), "exact")
    assert (exact.status, exact.b, exact.n) == ("pass", 0, N), exact.reason
    _, (broken,) = rung(run_with({7: 0.4}), "exact")
    assert (broken.status, broken.b) == ("regression", 1) and "doc 7 (rewind turn 3)" in broken.reason, broken.reason
    assert "400 of 600 prompt tokens cached" in broken.reason


def test_healthy_drift_passes_the_divergence_rung_and_moved_returns_are_a_regression():
    # Extensions drift by 0.07 (so the exact rung does not apply); returns drift no more.
    healthy = {doc: 0.07 * (doc % 3 == 0) for doc in range(N)}
    result, (check,) = rung(run_with(healthy, extend_shift=0.07), "divergence")
    assert check.status == "pass" and check.b == 0 and not [c for c in result.checks if c.kind == "exact"], check.reason
    buggy = {**healthy, **{doc: 0.35 + 0.03 * doc for doc in range(9)}}
    result, (check,) = rung(run_with(buggy, extend_shift=0.07), "divergence")
    assert (check.status, check.b, check.n) == ("regression", 9, N), check.reason
    assert check.p_adjusted is not None and check.p_adjusted <= 0.05 and check.family == "divergence default"
    assert "doc 8 (rewind turn 3)" in check.reason and result.verdict == "regression"


def test_one_moved_return_among_forty_cannot_decide():
    _, (check,) = rung(run_with({5: 0.5}, extend_shift=0.07), "divergence")
    assert (check.status, check.b) == ("inconclusive", 1), check.reason


def test_returns_the_cache_never_served_are_not_judged():
    _, (check,) = rung(run_with({doc: 0.5 for doc in range(N)}, extend_shift=0.07, cached=0), "divergence")
    assert check.status == "inconclusive" and "never engaged" in check.reason


def recomputing(run: Run, docs: list[int], cached: int = 17) -> Run:
    """`run` with the warm sides of `docs` served from only `cached` tokens (the rest of each prompt recomputed)."""
    samples = run.samples.copy()
    samples.loc[(samples["cache"] == "on") & samples["doc_id"].isin(docs), "cached_tokens"] = cached
    return Run(run.path, run.manifest, samples, run.noise)


def test_returns_that_recomputed_more_than_any_healthy_pair_are_left_out():
    """A build that keeps only an early checkpoint recomputes most of a return (llama.cpp 2026.7.10068 on Gemma-3: 17 of
    1,047 tokens cached), and another prefill split moves a sensitive prompt's answer on a healthy build as well
    (scripts/split_screen.py): no extension recomputed as much, so such returns have no reference and are left out."""
    moved = {doc: 1.7 * (doc < 2) for doc in range(N)}
    _, (check,) = rung(recomputing(run_with(moved, extend_shift=0.07), [0, 1]), "divergence")
    assert (check.status, check.b, check.n) == ("pass", 0, N - 2), check.reason
    assert "2 engaged returns left out: each recomputed more of its prompt (up to 583 tokens) than any healthy pair (200)" in check.reason
    _, (kept,) = rung(run_with(moved, extend_shift=0.07), "divergence")  # as much recomputed as an extension: judged
    assert (kept.b, kept.n) == (2, N) and kept.status != "pass", kept.reason
    _, (exact,) = rung(recomputing(run_with({0: 0.4}), [0]), "exact")  # the exact rung alike
    assert (exact.status, exact.n) == ("pass", N - 1) and "1 engaged return left out: each recomputed" in exact.reason, exact.reason
    _, (none,) = rung(recomputing(run_with(moved, extend_shift=0.07), list(range(N))), "divergence")
    assert none.status == "inconclusive" and none.reason.startswith("no engaged return recomputed as little"), none.reason


def test_a_run_without_logprobs_gets_no_logprob_finding():
    run = run_with({})
    run = Run(Path("r"), run.manifest, run.samples.assign(logprobs=None), run.noise.assign(logprobs=None))
    assert not [c for c in evaluate(run, POLICY).checks if c.kind in ("exact", "divergence")]


def test_the_divergence_policy_section_sets_the_margin():
    policy = POLICY.model_copy(update={"checks": {"divergence": {"margin": 1.0}}})
    buggy = {doc: 0.5 for doc in range(9)}
    checks = [c for c in evaluate(run_with(buggy, extend_shift=0.07), policy).checks if c.kind == "divergence"]
    assert [c.status for c in checks] == ["pass"]
    assert pd.notna(checks[0].threshold) and checks[0].threshold == pytest.approx(1.07)


def test_the_aa_arm_is_no_reference_for_warm_pairs():
    """Cold-vs-cold pairs are bitwise zero on llama.cpp while a healthy warm path drifts: pooled with the returns they
    would call that drift a regression. With the A/A arm but no judged extension the logprob rungs do not apply."""
    run = run_with({doc: 0.07 for doc in range(N)})
    returns = run.samples[run.samples["turn_kind"] == "rewind"]
    with_aa = Run(Path("r"), manifest_for(returns), returns, run.noise)
    assert len(with_aa.noise) and not [c for c in evaluate(with_aa, POLICY).checks if c.kind in ("exact", "divergence")]


def test_a_run_that_collected_no_healthy_reference_gets_no_logprob_finding():
    """No judged extension (a conversation sweep judging returns only): the rungs do not apply, so they do not
    make every such run inconclusive; with even one healthy pair they still judge (below their minimum: inconclusive)."""
    run = run_with({doc: 0.5 for doc in range(N)}, replica=False)
    returns = run.samples[run.samples["turn_kind"] == "rewind"]
    bare = Run(Path("r"), manifest_for(returns), returns, run.noise)
    assert not [c for c in evaluate(bare, POLICY).checks if c.kind in ("exact", "divergence")]
    one_extension = run.samples[(run.samples["turn_kind"] == "rewind") | (run.samples["doc_id"] == N + 1)]
    some = Run(Path("r"), manifest_for(one_extension), one_extension, run.noise)
    (check,) = [c for c in evaluate(some, POLICY).checks if c.kind == "divergence"]
    assert check.status == "inconclusive" and "no healthy spread" in check.reason


def test_an_undecided_answer_rung_is_a_warning_where_the_divergence_rung_passed_and_every_move_was_a_near_tie():
    """The ladder: three answers moved at near ties (their logprobs within the healthy spread) leave a strict answer rung
    undecided; the divergence rung passed the cell, so the finding is a warning that says why, and the verdict a pass.
    A move beyond the spread keeps the answer rung's finding."""
    strict = POLICY.model_copy(update={"max_accuracy_drop": 0.05})
    healthy = run_with({}, extend_shift=0.07, flipped=frozenset({1, 2, 3}))
    result = evaluate(healthy, strict)
    (answers,) = [c for c in result.checks if c.kind == "accuracy" and c.comparison == "cache on vs off"]
    assert answers.status == "warning" and "near ties" in answers.reason and result.verdict == "pass", answers.reason
    beyond = run_with({1: 2.0}, extend_shift=0.07, flipped=frozenset({1, 2, 3}))
    result = evaluate(beyond, strict)
    (answers,) = [c for c in result.checks if c.kind == "accuracy" and c.comparison == "cache on vs off"]
    assert answers.status == "inconclusive" and result.verdict != "pass"


def first_token_run(returns: int, broken: bool) -> Run:
    """`returns` rewinds (broken: parting at token 0, 6 nats) and 16 extensions drifting up to 0.1 nats, 599 tokens cached."""
    rows = []
    for cache in ("off", "on"):
        for doc in range(returns + 16):
            ret = doc < returns
            warm = tokens(6.0, flip_at=0) if ret and broken else tokens(0.05 * (doc % 3))
            rows.append(
                dict(cache=cache, doc_id=doc, prompt_hash=f"h{doc}", response=f"#### {doc}", conversation=doc % 8, turn=3,
                     turn_kind="rewind" if ret else "extend", prompt_tokens=600, cached_tokens=599 if cache == "on" else 0,
                     logprobs=stored_logprobs(warm if cache == "on" else tokens()))
            )  # fmt: skip
    samples = sample_frame(rows)
    return Run(Path("r"), manifest_for(samples), samples, samples.iloc[:0])


def test_returns_that_part_at_their_first_token_decide_though_few_positions_are_compared():
    """A follow-up's copies of a broken return part at token 0: one position each, 8 in all, below `min_positions`
    (20), which guards a pass, not a difference found."""
    _, (check,) = rung(first_token_run(8, broken=True), "divergence")
    assert (check.status, check.b, check.n) == ("regression", 8, 8), check.reason
    _, (check,) = rung(first_token_run(2, broken=False), "divergence")  # 2 x 8 positions
    assert check.status == "inconclusive" and "16 token positions compared over 2 judged pairs" in check.reason
