"""The `agreement` metric: an answer is right when it is the cache-off answer of the same server to the same prompt.

A random-weights model answers every question wrong with the cache on or off, so the task's
metric sees no flip; agreement sees each cache-on answer that differs from the cache-off one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from frames import manifest_for, sample_frame

from evalctl.agreement import AGREEMENT, with_agreement
from evalctl.analysis.gate import GatePolicy, evaluate
from evalctl.analysis.noise import noise_by_profile
from evalctl.runs import Run

N = 40


def random_model_run(differ: set[int] | dict[str, set[int]], noise_differ: set[int] | None = None) -> Run:
    """Cache off and on over N questions, every answer wrong by the task's metric; cache-on
    responses differ from cache-off ones on the docs in `differ` (or per variant, the first the
    baseline). `noise_differ`: an A/A replica of the cache-off cell whose responses differ on those docs."""
    rows = []
    for variant, changed in (differ if isinstance(differ, dict) else {"default": differ}).items():
        for cache in ("off", "on"):
            for doc in range(N):
                text = f"gibberish {doc}" + (" (warm)" if cache == "on" and doc in changed else "")
                rows.append(dict(variant=variant, cache=cache, doc_id=doc, prompt_hash=f"p{doc}", response=text,
                                 strict_answer=None, flexible_answer=None, strict_correct=False, flexible_correct=False))  # fmt: skip
    samples = sample_frame(rows)
    noise = None
    if noise_differ is not None:
        off = samples[(samples["cache"] == "off") & (samples["variant"] == samples["variant"].iloc[0])]
        noise = off.assign(response=[r + (" (again)" if d in noise_differ else "") for r, d in zip(off["response"], off["doc_id"])])
    manifest = manifest_for(samples)
    manifest.config["variants"] = [{"name": v} for v in dict.fromkeys(samples["variant"])]
    return Run(Path("r"), manifest, samples, noise)


def accuracy_checks(result) -> dict[tuple[str, str, str], object]:
    """The gate's paired accuracy checks by (variant, cache, comparison)."""
    return {(c.variant, c.cache, c.comparison): c for c in result.checks if c.kind == "accuracy"}


def test_each_answer_is_scored_against_the_cache_off_answer_of_its_own_server_and_question():
    samples = sample_frame(
        [
            dict(cache="off", doc_id=0, prompt_hash="a", response="x"),
            dict(cache="on", doc_id=0, prompt_hash="a", response="x"),
            dict(cache="off", doc_id=1, prompt_hash="b", response="y"),
            dict(cache="on", doc_id=1, prompt_hash="b", response="z"),
            dict(cache="on", doc_id=1, prompt_hash="b", response="y", pass_index=2),
            dict(cache="on", doc_id=1, prompt_hash="b", response="y", variant="other"),  # another server: no reference
            dict(cache="off", doc_id=2, prompt_hash="c", response=None, error="timeout", error_kind="timeout"),
            dict(cache="on", doc_id=2, prompt_hash="c", response="w"),  # its reference got no answer
            dict(cache="on", doc_id=3, prompt_hash="d", response=None, error="server died", error_kind="server_died"),
        ]
    )
    scored = with_agreement(samples)
    assert scored[f"{AGREEMENT}_correct"].tolist() == [True, True, True, False, True, None, None, None, None]
    assert scored[f"{AGREEMENT}_answer"].tolist() == ["x", "x", "y", "z", "y", "y", None, "w", None]


def test_the_gate_judged_by_agreement_finds_the_cache_on_answers_the_task_metric_cannot_see():
    run = random_model_run(differ=set(range(0, N, 2)))  # half the warm answers differ
    by_task = accuracy_checks(evaluate(run, GatePolicy(max_accuracy_drop=0.15)))
    # All wrong both ways: no flip, so the task's metric passes a server whose warm answers changed.
    assert [(c.status, c.b, c.c) for c in by_task.values()] == [("pass", 0, 0)]
    run = random_model_run(differ=set(range(0, N, 2)))
    result = evaluate(run, GatePolicy(metric=AGREEMENT, max_accuracy_drop=0.15))
    (check,) = accuracy_checks(result).values()
    assert (check.status, check.b, check.c, check.n) == ("regression", N // 2, 0, N)
    assert result.verdict == "regression"


def test_a_server_whose_warm_answers_are_its_cold_ones_passes_by_agreement():
    result = evaluate(random_model_run(differ=set()), GatePolicy(metric=AGREEMENT, max_accuracy_drop=0.15))
    (check,) = accuracy_checks(result).values()
    assert (check.status, check.b, check.c, check.n) == ("pass", 0, 0, N)
    invalid = [c for c in result.checks if c.kind == "invalid_rate"]
    assert invalid and all(c.status == "pass" for c in invalid)  # every response is an answer to agree with


def test_a_faulty_build_regresses_against_the_real_one_at_cache_on_only():
    run = random_model_run(differ={"real": set(), "faulty": set(range(N))})
    checks = accuracy_checks(evaluate(run, GatePolicy(metric=AGREEMENT, max_accuracy_drop=0.15)))
    variant = {k: c for k, c in checks.items() if k[2].startswith("variant")}
    assert {(k[1], c.status, c.b) for k, c in variant.items()} == {("off", "pass", 0), ("on", "regression", N)}
    assert checks[("real", "on", "cache on vs off")].status == "pass"
    assert checks[("faulty", "on", "cache on vs off")].status == "regression"


@pytest.mark.parametrize("noise_differ", [set(), set(range(8))])
def test_the_a_a_replica_is_scored_against_the_first_cold_run_so_its_flips_are_cold_vs_cold_disagreements(noise_differ):
    run = random_model_run(differ=set(range(6)), noise_differ=noise_differ)
    (check,) = accuracy_checks(evaluate(run, GatePolicy(metric=AGREEMENT, max_accuracy_drop=0.15))).values()
    (noise,) = noise_by_profile(run.samples, run.noise, AGREEMENT).values()
    assert (noise.n, noise.b, noise.c) == (N, len(noise_differ), 0)
    assert f"{len(noise_differ)} right->wrong, 0 wrong->right" in check.reason
