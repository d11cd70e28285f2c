"""The checks that a run tested what it claims, on hand-built frames: cache engagement, the
A/A noise rule, the cache speed-up warning and resolved-settings diffs."""

from __future__ import annotations

from pathlib import Path

from frames import manifest_for, sample_frame, sweep_frame

from evalctl.analysis.gate import GatePolicy, evaluate
from evalctl.analysis.settings import settings_diff_runs, settings_diff_variants
from evalctl.manifest import Manifest
from evalctl.runs import Run

SHOTS = (8, 16)


def cached_sweep(**kwargs):
    """A cache on/off sweep whose prompts are 4 chars a token and share all but their last 60 tokens."""
    df = sweep_frame(n=200, shots=SHOTS, **kwargs)
    df["prompt_chars"] = df["prompt_tokens"] * 4
    return df


def manifest_with_cells(df, shared_tokens=lambda shots: 150 * shots - 60, metrics=None) -> Manifest:
    servers = [
        {
            "profile": "cpu",
            "variant": "default",
            "cache": cache,
            "cells": [
                {
                    "shots": s,
                    "concurrency": 4,
                    "pass_index": 1,
                    "shared_prefix_chars": 4 * shared_tokens(s),
                    **(metrics or {}).get((cache, s), {}),
                }
                for s in SHOTS
            ],
        }
        for cache in ("on", "off")
    ]
    return Manifest.model_validate({**manifest_for(df).model_dump(), "servers": servers})


def by_kind(result, kind):
    return [c for c in result.checks if c.kind == kind]


def test_healthy_cache_cells_are_engaged_and_the_comparisons_pass():
    df = cached_sweep()
    result = evaluate(Run(Path("r"), manifest_with_cells(df), df), GatePolicy())
    engaged = by_kind(result, "cache-engaged")
    assert len(engaged) == 4 and all(c.status == "pass" for c in engaged), [c.reason for c in engaged]
    assert result.verdict == "pass"


def test_the_server_counted_shared_prefix_is_what_a_cache_on_cell_is_held_to():
    df = cached_sweep()
    df.loc[df.cache == "on", "cached_tokens"] = 20  # per-question prompts: a 20-token opening shared, held by the cache
    estimated = manifest_with_cells(df, lambda shots: 50)  # its 200 chars at the requests' 4 chars a token: 50 expected
    failed = [c for c in by_kind(evaluate(Run(Path("r"), estimated, df), GatePolicy()), "cache-engaged") if c.status != "pass"]
    assert {c.cache for c in failed} == {"on"} and "engaged on too few tokens" in failed[0].reason
    counted = estimated.model_copy(deep=True)
    for cell in (cell for server in counted.servers for cell in server.cells):
        cell.shared_prefix_tokens = 20  # the server's tokenizer: an opening of words, not digits
    engaged = by_kind(evaluate(Run(Path("r"), counted, df), GatePolicy()), "cache-engaged")
    assert all(c.status == "pass" for c in engaged), [c.reason for c in engaged]


def test_a_cache_on_cell_that_never_engaged_makes_its_comparisons_inconclusive():
    df = cached_sweep()
    df.loc[(df.cache == "on") & (df.shots == 16), "cached_tokens"] = 0  # e.g. a proxy stripped the cache
    result = evaluate(Run(Path("r"), manifest_with_cells(df), df), GatePolicy())
    failed = [c for c in by_kind(result, "cache-engaged") if c.status != "pass"]
    assert [(c.cache, c.shots) for c in failed] == [("on", 16)]
    assert "cache did not engage" in failed[0].reason and failed[0].status == "inconclusive"
    at_16 = [c for c in result.checks if c.kind in ("accuracy", "throughput") and c.shots == 16]
    assert at_16 and all(c.status == "inconclusive" and "cache did not engage" in c.reason for c in at_16)
    at_8 = [c for c in result.checks if c.kind == "accuracy" and c.shots == 8]
    assert [c.status for c in at_8] == ["pass"]  # the other cell's comparison still stands
    assert result.verdict == "inconclusive"


def test_warm_requests_answered_by_cold_retries_are_named_not_called_a_cache_that_did_not_engage():
    df = cached_sweep()
    cold = (df.cache == "on") & (df.shots == 16) & (df.doc_id < 150)  # their first attempts failed, retries came back cold
    df.loc[cold, ["attempts", "cached_tokens"]] = [2, 0]
    df.loc[(df.cache == "on") & (df.shots == 8), "cached_tokens"] //= 4  # engaged on a quarter of what it could
    result = evaluate(Run(Path("r"), manifest_with_cells(df), df), GatePolicy())
    status = {(c.cache, c.shots): c for c in by_kind(result, "cache-engaged")}
    assert status[("on", 16)].status == "inconclusive" and "cache did not engage" not in status[("on", 16)].reason
    assert status[("on", 16)].reason.startswith(
        "150 warm requests failed their first attempt and were answered by a retry with no cached tokens"
    )
    assert status[("on", 8)].reason.startswith("cache engaged on too few tokens")
    [retried] = [c for c in by_kind(result, "first-attempt") if c.shots == 16]  # and the retries themselves are judged
    assert retried.status == "regression" and "150 of 200 requests failed their first attempt (kind unrecorded)" in retried.reason


def test_engagement_falls_back_to_the_metrics_delta_and_catches_a_cache_off_cell_that_hit():
    df = cached_sweep()
    df.loc[df.cache == "on", "cached_tokens"] = None  # the engine reports no per-request cached tokens
    df.loc[(df.cache == "off") & (df.shots == 8), "cached_tokens"] = 1000
    metrics = {
        ("on", s): {"metrics_before": {"cached_tokens": 5.0}, "metrics_after": {"cached_tokens": 5.0 + 200 * 150 * s}} for s in SHOTS
    }
    result = evaluate(Run(Path("r"), manifest_with_cells(df, metrics=metrics), df), GatePolicy())
    status = {(c.cache, c.shots): c for c in by_kind(result, "cache-engaged")}
    assert status[("on", 8)].status == status[("on", 16)].status == "pass" and "/metrics" in status[("on", 8)].reason
    assert status[("off", 8)].status == "inconclusive" and "served from a cache" in status[("off", 8)].reason
    assert status[("off", 16)].status == "pass"


def noise_replica(b0: int, c0: int, n: int = 200) -> pd.DataFrame:  # noqa: F821
    """The cache-off 8-shot cell run again: the first b0 right answers turn wrong, the first c0 wrong ones right."""
    df = sweep_frame(n=n, shots=(8,))
    ref = df[df.cache == "off"].copy()
    right = ref["strict_correct"].astype(bool)
    turn_wrong = ref[right].index[:b0]
    turn_right = ref[~right].index[:c0]
    ref.loc[turn_wrong, ["strict_correct", "flexible_correct"]] = False
    ref.loc[turn_right, ["strict_correct", "flexible_correct"]] = True
    return ref


def test_noise_turns_a_would_be_regression_at_a_high_noise_rate_into_inconclusive():
    df = sweep_frame(n=200, shots=(8,), to_wrong={8: set(range(12))})  # a 6-point drop, 12 flips one way
    manifest = manifest_for(df)
    plain = evaluate(Run(Path("r"), manifest, df), GatePolicy())
    assert [c.status for c in by_kind(plain, "accuracy")] == ["regression"]

    noisy = evaluate(Run(Path("r"), manifest, df, noise_replica(b0=20, c0=4)), GatePolicy())  # A/A: 12% flip, 8 points lost
    (check,) = by_kind(noisy, "accuracy")
    assert check.status == "inconclusive" and "own noise drop (upper bound 0.119)" in check.reason
    assert "A/A noise" in check.reason and "24/200 flipped (12.0%)" in check.reason
    assert noisy.verdict == "inconclusive"

    quiet = evaluate(Run(Path("r"), manifest, df, noise_replica(b0=0, c0=0)), GatePolicy())  # deterministic engine
    (check,) = by_kind(quiet, "accuracy")
    assert check.status == "regression" and "0/200 flipped (0.0%)" in check.reason


def test_cache_speedup_warns_when_cache_on_ttft_is_not_well_below_cache_off():
    rows = []
    for cache, ttft in (("on", 0.2), ("off", 1.0)):
        for shots, scale in ((1, 0.5), (8, 1.0)):
            rows += [dict(cache=cache, shots=shots, doc_id=d, prompt_hash=f"{shots}-{d}", ttft_s=ttft * scale) for d in range(5)]
    fast = sample_frame(rows)
    (check,) = by_kind(evaluate(Run(Path("r"), manifest_for(fast), fast), GatePolicy()), "cache-speedup")
    assert check.status == "pass" and check.shots == 8 and abs(check.value - 0.2) < 1e-9
    slow = fast.assign(ttft_s=fast["ttft_s"].where(fast.cache == "off", fast["ttft_s"] * 4.5))
    result = evaluate(Run(Path("r"), manifest_for(slow), slow), GatePolicy())
    (check,) = by_kind(result, "cache-speedup")
    assert check.status == "warning" and "may not be working" in check.reason
    assert result.verdict != "pass" or all(c.status in ("pass", "warning") for c in result.checks)


def settings_manifest(run_id: str, **llamacpp: object) -> Manifest:
    settings = {"total_slots": 4, "default_generation_settings.n_ctx": 8192, **llamacpp}
    servers = [
        {
            "profile": "cpu",
            "variant": v,
            "cache": "on",
            "info": {"version": "1.0", "settings": settings | ({"total_slots": 2} if v == "patched" else {})},
        }
        for v in ("default", "patched")
    ]
    return Manifest.model_validate({"run_id": run_id, "servers": servers})


def test_settings_diffs_between_runs_and_variants_and_the_gate_warns_on_the_run_diff():
    base, cand = settings_manifest("base"), settings_manifest("cand", **{"default_generation_settings.n_ctx": 4096})
    diff = settings_diff_runs(base, cand)
    assert set(diff["setting"]) == {"default_generation_settings.n_ctx"} and len(diff) == 2  # both variants' servers
    assert set(diff["reference_value"]) == {"8192"} and set(diff["value"]) == {"4096"}
    variants = settings_diff_variants(base, "default")
    assert variants[["variant", "setting", "reference_value", "value"]].values.tolist() == [["patched", "total_slots", "4", "2"]]

    df = sweep_frame(n=40, shots=(8,))
    frames = {
        m.run_id: Run(Path(m.run_id), manifest_for(df).model_copy(update={"run_id": m.run_id, "servers": m.servers}), df)
        for m in (base, cand)
    }
    result = evaluate(frames["cand"], GatePolicy(), frames["base"])
    warnings = by_kind(result, "settings")
    assert [c.status for c in warnings] == ["warning", "warning"] and "n_ctx: 8192 -> 4096" in warnings[0].reason
    same = evaluate(frames["base"], GatePolicy(), frames["base"])
    assert not by_kind(same, "settings")
