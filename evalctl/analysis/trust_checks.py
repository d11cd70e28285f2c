"""Gate checks that a run tested what it claims: the cache engaged (or stayed off) as labelled, it
saved prefill time, and the servers resolved the settings the baseline's did.

A comparison resting on a cell that fails `cache-engaged` becomes inconclusive with the reason.
"""

from __future__ import annotations

from dataclasses import replace

from evalctl.analysis.cache_engagement import MAX_TTFT_RATIO, engagement_table, rests_on_failed, ttft_speedup
from evalctl.analysis.gate import Check
from evalctl.analysis.pairing import Comparison
from evalctl.analysis.settings import settings_diff_runs
from evalctl.analysis.throughput import throughput_table
from evalctl.records import CELL_KEYS
from evalctl.runs import Run

# Changed settings listed in a check's reason; the rest are counted.
SHOWN_SETTINGS = 5


def cache_engaged_checks(run: Run) -> tuple[list[Check], dict[tuple, str]]:
    """One check per cell with a shared prefix, and the failed cells' reasons by (comparison, cell) they invalidate."""
    table = engagement_table(run.samples, run.manifest)
    checks = [
        Check(
            f"cache {row['cache']} as labelled",
            "cache-engaged",
            "pass" if row["ok"] else "inconclusive",
            row["reason"],
            **{k: (int(row[k]) if k in ("shots", "pass_index") else str(row[k])) for k in CELL_KEYS},
            metric="cached / expected tokens",
            value=row["reported_tokens"] / row["expected_tokens"]
            if row["reported_tokens"] is not None and row["expected_tokens"]
            else None,
        )
        for _, row in table.iterrows()
    ]
    return checks, table


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


def settings_checks(run: Run, baseline: Run) -> list[Check]:
    """Per server, a warning when its resolved settings differ from the baseline run's same server."""
    diff = settings_diff_runs(baseline.manifest, run.manifest)
    checks = []
    for (profile, variant, cache), rows in diff.groupby(["profile", "variant", "cache"], sort=True):
        shown = "; ".join(f"{r.setting}: {r.reference_value} -> {r.value}" for r in rows.head(SHOWN_SETTINGS).itertuples())
        more = f" (+{len(rows) - SHOWN_SETTINGS} more)" if len(rows) > SHOWN_SETTINGS else ""
        checks.append(
            Check(
                "resolved settings as baseline's",
                "settings",
                "warning",
                f"{len(rows)} resolved setting(s) differ from baseline run {baseline.run_id}: {shown}{more}",
                profile=str(profile),
                variant=str(variant),
                cache=str(cache),
                n=len(rows),
            )
        )
    return checks


def trust_checks(checks: list[Check], run: Run, comparisons: list[Comparison], baseline: Run | None) -> list[Check]:
    """`checks` with the comparisons resting on a failed cache cell made inconclusive, plus the new checks."""
    engaged, table = cache_engaged_checks(run)
    failed = rests_on_failed(comparisons, table) if len(table) else {}
    out = []
    for check in checks:
        key = (check.comparison, check.profile, check.variant, check.cache, check.shots, check.pass_index)
        why = failed.get(key) if check.comparison else None
        if why and check.status != "inconclusive":
            check = replace(
                check, status="inconclusive", reason=f"rests on a cell whose cache label failed ({why}); was {check.status}: {check.reason}"
            )
        out.append(check)
    out += engaged + speedup_checks(run)
    if baseline is not None:
        out += settings_checks(run, baseline)
    return out
