"""Throughput per cell from request telemetry: rates over the cell's wall-clock window."""

from __future__ import annotations

import numpy as np
import pandas as pd

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
            ]
        )
    out = df.groupby(by, sort=True, dropna=False).apply(_throughput_row, include_groups=False).reset_index()
    out["requests"] = out["requests"].astype(int)
    return out


def throughput_ratio(candidate: pd.DataFrame, reference: pd.DataFrame, on: list[str]) -> pd.DataFrame:
    """Candidate over reference rates for cells matched on `on` (cache on/off, or run vs baseline)."""
    rates = ["requests_per_s", "output_tokens_per_s"]
    merged = candidate[[*on, *rates]].merge(reference[[*on, *rates]], on=on, suffixes=("", "_ref"))
    for rate in rates:
        merged[f"{rate}_ratio"] = merged[rate] / merged[f"{rate}_ref"]
    return merged.sort_values(on).reset_index(drop=True)
