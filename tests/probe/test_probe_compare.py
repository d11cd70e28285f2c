"""Pure comparison and verdict functions of the probe: no server."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalctl.client import Completion, FailedAttempt, TokenLogprob
from evalctl.probe.compare import compare, first_divergence, js_divergence
from evalctl.probe.policy import ProbePolicy
from evalctl.probe.prompts import ProbePrompt, synthetic_lengths
from evalctl.probe.runner import ProbeSample
from evalctl.probe.verdict import bin_verdicts, overall, sample_rows

CONFIDENT = {"a": math.log(0.9), "b": math.log(0.05)}


def test_first_divergence():
    assert first_divergence("abc", "abc") is None
    assert first_divergence("abc", "abd") == 2
    assert first_divergence("xbc", "abc") == 0
    assert first_divergence("ab", "abc") == 2  # one stopped early


def test_js_divergence_bounds():
    assert js_divergence(CONFIDENT, CONFIDENT) == pytest.approx(0.0, abs=1e-12)
    disjoint = js_divergence({"a": math.log(0.99)}, {"z": math.log(0.99)})
    assert 0.6 < disjoint <= math.log(2) + 1e-9
    # a swap in the unlikely tail barely moves it
    tail = js_divergence({"a": math.log(0.9), "b": math.log(0.001)}, {"a": math.log(0.9), "c": math.log(0.001)})
    assert tail < 1e-3


logprob_lists = st.dictionaries(st.sampled_from("abcdef"), st.floats(min_value=-12, max_value=-0.05), min_size=1, max_size=4)


@given(logprob_lists, logprob_lists)
def test_js_divergence_symmetric_and_bounded(p, q):
    # keep each list a valid partial distribution
    if sum(math.exp(v) for v in p.values()) > 1 or sum(math.exp(v) for v in q.values()) > 1:
        return
    d = js_divergence(p, q)
    assert 0 <= d <= math.log(2) + 1e-9
    assert d == pytest.approx(js_divergence(q, p), abs=1e-9)


def test_compare_uses_aligned_positions_only():
    tops_a = [CONFIDENT, CONFIDENT, CONFIDENT]
    tops_b = [CONFIDENT, {"b": math.log(0.9), "a": math.log(0.05)}, {"z": 0.0}]
    cmp = compare(["a", "a", "a"], ["a", "b", "z"], tops_a, tops_b)
    assert not cmp.exact and cmp.first_divergence == 1
    assert cmp.aligned == 2  # position 2 follows different tokens: not compared
    assert cmp.top1_agreement == 0.5
    assert cmp.js_max > 0.3 and cmp.js_mean == pytest.approx(cmp.js_max / 2)
    same = compare(["a"], ["a"], [CONFIDENT], [CONFIDENT])
    assert same.exact and same.js_mean == pytest.approx(0.0, abs=1e-12) and same.top1_agreement == 1.0
    assert compare("ab", "ab").js_mean is None  # no logprobs: tokens only


def gen(tokens: str, *, first: dict = CONFIDENT, cached: int | None = 0, logprobs: bool = True) -> Completion:
    lps = tuple(
        TokenLogprob(t, -0.1, {t: math.log(0.9), **({} if i else {k: v for k, v in first.items() if k != t})}) for i, t in enumerate(tokens)
    )
    return Completion(tokens, "length", 100, cached, len(tokens), 0.0, 0.1, 1, logprobs=lps if logprobs else None)


def sample(bin: str, cold: Completion, again: Completion, warm: Completion, prefix_tokens: int = 50) -> ProbeSample:
    prompt = ProbePrompt(bin, "fewshot", 1, 0, "P" * prefix_tokens, "P" * prefix_tokens + "Q", prefix_tokens, ())
    return ProbeSample(prompt, cold, again, warm)


def verdicts(*samples: ProbeSample, policy: ProbePolicy | None = None):
    return bin_verdicts(sample_rows(samples), policy or ProbePolicy()).set_index("bin")


def test_verdict_pass_fail_and_inconclusive_per_bin():
    shifted = {"x": math.log(0.9), "a": math.log(0.05)}
    bins = verdicts(
        sample("same", gen("abc"), gen("abc"), gen("abc", cached=40), prefix_tokens=40),
        sample("lost", gen("abc"), gen("abc"), gen("xyz", first=shifted, cached=90), prefix_tokens=90),
        sample("uncached", gen("abc"), gen("abc"), gen("abc", cached=0), prefix_tokens=60),
    )
    assert list(bins.index) == ["same", "uncached", "lost"]  # shortest prefix first
    assert bins.loc["same", "verdict"] == "pass"
    assert bins.loc["lost", "verdict"] == "fail" and bins.loc["lost", "first_divergence"] == 0
    assert "divergence" in bins.loc["lost", "reason"]
    assert bins.loc["uncached", "verdict"] == "inconclusive"
    assert overall(bins.reset_index()) == "fail"
    assert overall(bins.drop(index="lost").reset_index()) == "inconclusive"


def test_baseline_nondeterminism_is_subtracted():
    shifted = {"x": math.log(0.9), "a": math.log(0.05)}
    noisy = gen("xyz", first=shifted)
    # the engine disagrees with itself cold as much as warm: not the cache's fault
    bins = verdicts(sample("noisy", gen("abc"), noisy, gen("xyz", first=shifted, cached=40)))
    assert bins.loc["noisy", "verdict"] == "pass"
    assert bins.loc["noisy", "baseline_js"] > 0.1


def test_without_logprobs_tokens_decide():
    policy = ProbePolicy(max_mismatch_excess=0.5)
    bins = verdicts(
        sample("differs", gen("abc", logprobs=False), gen("abc", logprobs=False), gen("abd", logprobs=False, cached=10)),
        policy=policy,
    )
    assert bins.loc["differs", "verdict"] == "fail"
    assert bins.loc["differs", "mismatch"] == 1.0 and bins.loc["differs", "baseline_mismatch"] == 0.0


def test_a_warm_request_answered_cold_by_its_retry_is_named_as_such():
    retried = replace(gen("abc", cached=0), attempts=2, failed_attempts=(FailedAttempt("http_5xx", "HTTP 500: on a hit", 0.01),))
    bins = verdicts(sample("retried", gen("abc"), gen("abc"), retried), sample("cold", gen("abc"), gen("abc"), gen("abc", cached=0)))
    assert bins.loc["retried", "verdict"] == bins.loc["cold", "verdict"] == "inconclusive"
    assert (
        bins.loc["retried", "reason"] == "warm request failed its first attempt (http_5xx) and its retry was served with no cached tokens"
    )
    assert bins.loc["cold", "reason"] == "warm request not served from cache (cached_tokens not > 0)"


def test_failed_request_makes_bin_inconclusive():
    broken = Completion(None, None, None, None, None, 0.0, 0.1, 1, "HTTP 400: context", "http_4xx")
    bins = verdicts(sample("err", gen("abc"), gen("abc"), broken))
    assert bins.loc["err", "verdict"] == "inconclusive" and "context" in bins.loc["err", "reason"]


def test_synthetic_lengths_around_chunk_and_bounds():
    policy = ProbePolicy(prefix_tokens=[100, 9999], chunk_offsets=[-64, 64], max_prefix_tokens=4096)
    assert synthetic_lengths(policy, 512) == {"prefix-100": 100, "chunk-64": 448, "chunk+64": 576}
    assert synthetic_lengths(policy, None) == {"prefix-100": 100}


def test_logprobs_parsed_from_both_response_shapes():
    from evalctl.client import _token_logprobs

    llamacpp = {
        "content": [
            {"id": 5, "token": " 5", "logprob": -0.1, "top_logprobs": [{"token": " 5", "logprob": -0.1}, {"token": " 6", "logprob": -2.5}]}
        ]
    }
    legacy = {"tokens": [" 5"], "token_logprobs": [-0.1], "top_logprobs": [{" 5": -0.1, " 6": -2.5}]}
    for raw in (llamacpp, legacy):
        (tok,) = _token_logprobs(raw)
        assert tok.token == " 5" and tok.logprob == -0.1 and tok.top == {" 5": -0.1, " 6": -2.5}
    assert _token_logprobs(None) is None and _token_logprobs({"content": [{"bad": 1}]}) is None


def test_probe_file_is_probe_json_when_one_profile_x_variant_runs():
    from evalctl.probe.session import probe_file
    from evalctl.schema import ServerProfile, SweepConfig, Variant
    from evalctl.servers.engines.llamacpp import LlamaCppSettings

    profile = ServerProfile(name="cpu", model_path="bundled:smollm2-135m", engine=LlamaCppSettings())
    variants = [Variant(name="baseline"), Variant(name="patched")]
    one_runs = SweepConfig(model="m", servers=[profile], variants=variants, run_variants=["baseline"])
    assert probe_file(one_runs, profile, variants[0]) == "probe.json"  # the documented name
    both_run = SweepConfig(model="m", servers=[profile], variants=variants, run_variants=["baseline", "patched"])
    assert probe_file(both_run, profile, variants[1]) == "probe-cpu-patched.json"
