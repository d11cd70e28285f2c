from __future__ import annotations

from frames import sweep_frame

from evalctl.analysis.cliff import find_cliffs, paired_by_length
from evalctl.analysis.pairing import within_run


def cache_comparison(df):
    return [c for c in within_run(df) if c.kind == "cache"][0]


def test_cliff_is_the_first_bin_of_the_long_prompts_that_regress():
    df = sweep_frame(to_wrong={16: set(range(30)), 20: set(range(30))})
    bins = paired_by_length(cache_comparison(df), "prompt_tokens")
    assert bins["n"].sum() == 600
    cliffs = find_cliffs(bins, "prompt_tokens", tolerance=0.03, alpha=0.05)
    assert len(cliffs) == 1
    cliff = cliffs.iloc[0]
    eight_max, sixteen_min = 150 * 8 + 49, 150 * 16
    assert eight_max < cliff.bin_hi and cliff.bin_lo <= sixteen_min < cliff.bin_hi
    assert cliff.min_tokens == sixteen_min
    assert (cliff.n, cliff.b, cliff.c) == (400, 60, 0)
    assert cliff.p_adjusted <= 0.05


def test_cached_token_bins_use_the_cache_on_request():
    df = sweep_frame(to_wrong={20: set(range(40))})
    bins = paired_by_length(cache_comparison(df), "cached_tokens")
    assert bins["min_tokens"].min() == 150 * 8 - 60
    cliff = find_cliffs(bins, "cached_tokens", 0.03, 0.05).iloc[0]
    assert cliff.min_tokens == 150 * 20 - 60


def test_no_cliff_for_balanced_noise_or_a_drop_within_tolerance():
    noise = sweep_frame(to_wrong={s: {0, 1} for s in (8, 16, 20)}, to_right={s: {190, 191} for s in (8, 16, 20)})
    assert find_cliffs(paired_by_length(cache_comparison(noise)), "prompt_tokens", 0.03, 0.05).empty
    small = sweep_frame(to_wrong={20: set(range(4))})  # a 2-point drop
    assert find_cliffs(paired_by_length(cache_comparison(small)), "prompt_tokens", 0.03, 0.05).empty
