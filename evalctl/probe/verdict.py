"""Per prompt comparisons -> per prefix-length bin verdicts.

A bin fails when warm generations depart from cold ones by more than cold ones depart from each
other (the engine's own nondeterminism, measured, not assumed zero) plus the policy's tolerance; it
is inconclusive when a request failed or the warm request reported no cached tokens.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pandas as pd

from evalctl.client import Completion
from evalctl.probe.compare import compare
from evalctl.probe.policy import ProbePolicy
from evalctl.probe.runner import ProbeSample

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"


def _sequence(c: Completion) -> tuple[list[str], list[dict] | None]:
    """Generated tokens with their top-k, or the text's characters when the server returned no logprobs."""
    if c.logprobs:
        return [t.token for t in c.logprobs], [t.top for t in c.logprobs]
    return list(c.text or ""), None


def sample_rows(samples: Sequence[ProbeSample]) -> pd.DataFrame:
    """One row per probe prompt: cold vs warm (`cw_*`) and cold vs cold again (`cc_*`)."""
    rows = []
    for s in samples:
        error = next((c.error for c in (s.cold, s.cold_repeat, s.warm) if c.error), None)
        row = {
            "bin": s.prompt.bin,
            "kind": s.prompt.kind,
            "doc_id": s.prompt.doc_id,
            "prefix_tokens": s.prompt.prefix_tokens,
            "prompt_tokens": s.cold.prompt_tokens,
            "warm_cached_tokens": s.warm.cached_tokens,
            "warm_first_error_kind": s.warm.first_error_kind,  # answered on a retry: the cache may be why
            "cold_text": s.cold.text,
            "warm_text": s.warm.text,
            "error": error,
        }
        if error is None:
            cold, cold_top = _sequence(s.cold)
            for key, other in (("cw", s.warm), ("cc", s.cold_repeat)):
                tokens, top = _sequence(other)
                measures = dataclasses.asdict(compare(cold, tokens, cold_top, top))
                row |= {f"{key}_{name}": value for name, value in measures.items() if name != "aligned"}
        row["logprobs"] = row.get("cw_js_mean") is not None and row.get("cc_js_mean") is not None
        rows.append(row)
    return pd.DataFrame(rows)


def _bin_verdict(group: pd.DataFrame, policy: ProbePolicy) -> dict:
    out = {
        "kind": group["kind"].iloc[0],
        "prefix_tokens": int(group["prefix_tokens"].min()),
        "prompts": len(group),
        "cached_tokens": group["warm_cached_tokens"].min(),
    }
    failed = group["error"].dropna()
    if len(failed):
        return out | {"verdict": INCONCLUSIVE, "reason": f"request failed: {failed.iloc[0]}"}
    mismatch = 1 - group["cw_exact"].mean()
    baseline = 1 - group["cc_exact"].mean()
    js, js_base = group["cw_js_mean"].mean(), group["cc_js_mean"].mean()
    out |= {
        "mismatch": mismatch,
        "baseline_mismatch": baseline,
        "first_divergence": group["cw_first_divergence"].min(),
        "top1_agreement": group["cw_top1_agreement"].mean(),
        "js": js,
        "baseline_js": js_base,
    }
    cold = ~(group["warm_cached_tokens"] > 0)  # none reported counts as cold
    if cold.any():
        retried = group.loc[cold, "warm_first_error_kind"].dropna()
        if len(retried):  # retries are evidence: a server that failed on its cache, not a cache that never engaged
            why = f"warm request failed its first attempt ({retried.iloc[0]}) and its retry was served with no cached tokens"
            return out | {"verdict": INCONCLUSIVE, "reason": why}
        return out | {"verdict": INCONCLUSIVE, "reason": "warm request not served from cache (cached_tokens not > 0)"}
    if group["logprobs"].all():
        excess = js - js_base
        if excess > policy.max_divergence:
            return out | {"verdict": FAIL, "reason": f"top-k divergence exceeds baseline by {excess:.3f} > {policy.max_divergence}"}
        return out | {"verdict": PASS, "reason": ""}
    excess = mismatch - baseline
    if excess > policy.max_mismatch_excess:
        return out | {"verdict": FAIL, "reason": f"warm output differs in {mismatch:.0%} of prompts, cold repeat in {baseline:.0%}"}
    return out | {"verdict": PASS, "reason": "no logprobs: tokens compared only"}


def bin_verdicts(rows: pd.DataFrame, policy: ProbePolicy) -> pd.DataFrame:
    """One row per prefix-length bin, shortest prefix first."""
    bins = [{"bin": name} | _bin_verdict(group, policy) for name, group in rows.groupby("bin", sort=False)]
    return pd.DataFrame(bins).sort_values("prefix_tokens", kind="stable").reset_index(drop=True)


def overall(bins: pd.DataFrame) -> str:
    """fail if any bin fails; inconclusive if any bin could not be judged; else pass."""
    verdicts = set(bins["verdict"])
    return FAIL if FAIL in verdicts else INCONCLUSIVE if INCONCLUSIVE in verdicts or not len(bins) else PASS
