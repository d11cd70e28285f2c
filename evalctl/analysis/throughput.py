"""Throughput per cell from request telemetry: rates over the cell's wall-clock window."""

from __future__ import annotations

import numpy as np
import pandas as pd

from evalctl.analysis.inflight import cell_in_flight
from evalctl.analysis.pairing import Comparison, match
from evalctl.records import CELL_KEYS


def _throughput_row(group: pd.DataFrame) -> pd.Series:
    ok = group[group["error"].isna()]
    ends = group["started_at"] + group["latency_s"].fillna(0)
    wall = float(ends.max() - group["started_at"].min()) if len(group) else float("nan")
    latency = ok["latency_s"].dropna().to_numpy()
    ttft = ok["ttft_s"].dropna().astype(float).to_numpy()  # only streamed requests have one
    itl = ok["itl_s"].dropna().astype(float).to_numpy() if "itl_s" in ok else np.array([])
    prompt = ok["prompt_tokens"].dropna().sum()
    cached = ok["cached_tokens"].dropna().sum()
    held = cell_in_flight(group)  # what the server was sent at once, beside the level asked for

    def pct(q: float, values: np.ndarray = latency) -> float:
        return float(np.percentile(values, q)) if values.size else float("nan")

    return pd.Series({
        "requests": len(group),
        "wall_s": wall,
        "requests_per_s": len(ok) / wall if wall > 0 else float("nan"),
        "output_tokens_per_s": ok["completion_tokens"].dropna().sum() / wall if wall > 0 else float("nan"),
        "latency_p50_s": pct(50),
        "latency_p90_s": pct(90),
        "latency_p99_s": pct(99),
        "ttft_p50_s": pct(50, ttft),
        "ttft_p90_s": pct(90, ttft),
        "itl_p50_s": pct(50, itl),
        "mean_prompt_tokens": ok["prompt_tokens"].dropna().mean() if len(ok) else float("nan"),
        "cache_hit_ratio": cached / prompt if prompt else float("nan"),
        "in_flight_mean": held.mean,
        "in_flight_max": held.max,
    })  # fmt: skip


def throughput_table(df: pd.DataFrame, by: list[str] | None = None) -> pd.DataFrame:
    by = by or CELL_KEYS
    if df.empty:
        return pd.DataFrame(
            columns=[
                *by,
                "requests",
                "wall_s",
                "requests_per_s",
                "output_tokens_per_s",
                "latency_p50_s",
                "latency_p90_s",
                "latency_p99_s",
                "ttft_p50_s",
                "ttft_p90_s",
                "itl_p50_s",
                "mean_prompt_tokens",
                "cache_hit_ratio",
                "in_flight_mean",
                "in_flight_max",
            ]
        )
    out = df.groupby(by, sort=True, dropna=False).apply(_throughput_row, include_groups=False).reset_index()
    out["requests"] = out["requests"].astype(int)
    return out


# Cell-wide figures `throughput_ratios` divides: higher is better for rates, lower for latencies.
RATES = ("requests_per_s", "output_tokens_per_s")
LATENCIES = ("latency_p50_s", "latency_p90_s", "ttft_p50_s")
RATIO_COLUMNS = [
    "kind",
    "comparison",
    "reference",
    *CELL_KEYS,
    "measure",
    "ref_value",
    "cand_value",
    "ratio",
    "slowdown",
    "ref_requests",
    "cand_requests",
]


def throughput_ratios(comparisons: list[Comparison]) -> pd.DataFrame:
    """What `evalctl compare` prints (a description; the gate's test is checks/throughput.py): one row per
    (comparison, candidate cell, measure), both values, candidate/reference ratio, and the slowdown as a
    fraction of the reference throughput: 1 - ratio for rates, 1 - 1/ratio for latencies (a latency twice
    as long is a slowdown of 0.5, as is half the rate). Measures missing on either side (no streamed TTFT)
    are left out.
    """
    parts = []
    for comp in comparisons:
        cells = match(comp)
        for measure in (*RATES, *LATENCIES):
            part = cells[[*CELL_KEYS, f"{measure}_ref", measure, "requests_ref", "requests"]].dropna(subset=[f"{measure}_ref", measure])
            part = part.rename(
                columns={f"{measure}_ref": "ref_value", measure: "cand_value", "requests_ref": "ref_requests", "requests": "cand_requests"}
            )
            part = part[part["ref_value"] > 0]
            ratio = part["cand_value"] / part["ref_value"]
            part = part.assign(
                kind=comp.kind,
                comparison=comp.name,
                reference=comp.reference_label,
                measure=measure,
                ratio=ratio,
                slowdown=1 - ratio if measure in RATES else 1 - 1 / ratio,
            )
            parts.append(part)
    parts = [p for p in parts if not p.empty]
    if not parts:
        return pd.DataFrame(columns=RATIO_COLUMNS)
    return pd.concat(parts, ignore_index=True)[RATIO_COLUMNS]
