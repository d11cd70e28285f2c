"""At the longest prefix, cache-on TTFT well below cache-off; a warning otherwise (the cache may not work)."""

from __future__ import annotations

import pandas as pd

from evalctl.analysis.checks.base import Check, GateCheck, GateInputs
from evalctl.analysis.throughput import throughput_table

# At the longest prefix, cache-on TTFT above this share of cache-off TTFT: the cache saved too little prefill.
MAX_TTFT_RATIO = 0.8
SPEEDUP_COLUMNS = ["profile", "variant", "pass_index", "shots", "ttft_on_s", "ttft_off_s", "ratio"]


def ttft_speedup(throughput: pd.DataFrame) -> pd.DataFrame:
    """Cache-on over cache-off median TTFT at each (profile, variant, pass)'s longest prefix (most shots), from a throughput table."""
    keys = ["profile", "variant", "pass_index"]
    timed = throughput.dropna(subset=["ttft_p50_s"])
    on, off = timed[timed["cache"] == "on"], timed[timed["cache"] == "off"]
    both = on.merge(off, on=[*keys, "shots"], suffixes=("_on", "_off"))
    if both.empty:
        return pd.DataFrame(columns=SPEEDUP_COLUMNS)
    longest = both.loc[both.groupby(keys)["shots"].idxmax()]
    on_s, off_s = longest["ttft_p50_s_on"], longest["ttft_p50_s_off"]
    return longest.assign(ttft_on_s=on_s, ttft_off_s=off_s, ratio=on_s / off_s)[SPEEDUP_COLUMNS].reset_index(drop=True)


class CacheSpeedup(GateCheck):
    kind = "cache-speedup"
    order = 60

    def results(self, inputs: GateInputs) -> list[Check]:
        checks = []
        for _, row in ttft_speedup(throughput_table(inputs.run.samples)).iterrows():
            ok = row["ratio"] <= MAX_TTFT_RATIO
            reason = (
                f"TTFT p50 cache on {row['ttft_on_s']:.3g}s vs off {row['ttft_off_s']:.3g}s at {row['shots']} shots: "
                f"ratio {row['ratio']:.2f} {'<=' if ok else '>'} {MAX_TTFT_RATIO}{'' if ok else '; the cache may not be working'}"
            )
            checks.append(
                Check(
                    "cache-on speed-up",
                    "cache-speedup",
                    "pass" if ok else "warning",
                    reason,
                    profile=row["profile"],
                    variant=row["variant"],
                    cache="on",
                    shots=int(row["shots"]),
                    pass_index=int(row["pass_index"]),
                    metric="TTFT p50 on/off",
                    value=float(row["ratio"]),
                    threshold=MAX_TTFT_RATIO,
                )
            )
        return checks


CHECK = CacheSpeedup()  # listed in analysis.checks.CHECKS
