"""At the longest prefix, cache-on TTFT well below cache-off; a warning otherwise (the cache may not work)."""

from __future__ import annotations

from evalctl.analysis.cache_engagement import MAX_TTFT_RATIO, ttft_speedup
from evalctl.analysis.checks.base import Check, GateCheck, GateInputs
from evalctl.analysis.throughput import throughput_table
from evalctl.runs import Run


def speedup_checks(run: Run) -> list[Check]:
    """At the longest prefix, cache-on TTFT well below cache-off; a warning otherwise (the cache may not work)."""
    checks = []
    for _, row in ttft_speedup(throughput_table(run.samples)).iterrows():
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


class CacheSpeedup(GateCheck):
    kind = "cache-speedup"
    order = 60

    def results(self, inputs: GateInputs) -> list[Check]:
        return speedup_checks(inputs.run)


CHECK = CacheSpeedup()  # listed in analysis.checks.CHECKS
