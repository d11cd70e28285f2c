"""Throughput per cell from request telemetry: rates over the cell's wall-clock window.

A cell is one load level (its `concurrency`), so the table is throughput at each level: aggregate
output tokens/s and requests/s, TTFT and inter-token latency percentiles, the cache hit rate and,
under a latency objective (`slo:`), goodput: the rate of requests that met it.

And the requests the server held at once, measured from the records' timings (not the level the
client was asked for): a request is in flight from its send (`started_at`) to its last byte
(`started_at + latency_s`); over a cell's window (first send to last finish) this gives the
time-weighted mean and the most at any instant. Queued requests count: a level of 32 against a
server with 4 slots still shows 32 (what the engine batched is bounded by its slots, the manifest's
`parallel` / `max_running_requests`); a client that cannot keep the level up shows a lower mean.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from evalctl.analysis.pairing import Comparison, match
from evalctl.records import CELL_KEYS
from evalctl.schema import SloConfig

PERCENTILES = (50, 90, 99)
COLUMNS = [
    "requests",
    "wall_s",
    "requests_per_s",
    "output_tokens_per_s",
    "user_tokens_per_s",
    *(f"{m}_p{q}_s" for m in ("latency", "ttft", "itl") for q in PERCENTILES),
    "goodput_per_s",
    "mean_prompt_tokens",
    "cache_hit_ratio",
    "in_flight_mean",
    "in_flight_max",
]


@dataclass(frozen=True)
class InFlight:
    mean: float  # time-weighted over the window; NaN without a timed request
    max: int

    def describe(self) -> str:
        return f"{self.mean:.1f} in flight on average (max {self.max})"


def in_flight(starts: np.ndarray, ends: np.ndarray) -> InFlight:
    """Mean and max requests in flight over [min(starts), max(ends)]; a request ending as another starts does not overlap it."""
    starts, ends = np.asarray(starts, dtype=float), np.asarray(ends, dtype=float)
    timed = ~(np.isnan(starts) | np.isnan(ends))
    starts, ends = starts[timed], np.maximum(ends[timed], starts[timed])
    if not starts.size:
        return InFlight(float("nan"), 0)
    times = np.concatenate([starts, ends])
    steps = np.concatenate([np.ones(starts.size), -np.ones(ends.size)])
    order = np.lexsort((steps, times))  # at one instant, ends (-1) before starts (+1)
    times, held = times[order], np.cumsum(steps[order])
    window = times[-1] - times[0]
    mean = float(np.sum(held[:-1] * np.diff(times)) / window) if window > 0 else float(starts.size)
    return InFlight(mean, int(held.max()))


def cell_in_flight(rows: pd.DataFrame) -> InFlight:
    """In flight over one cell's sample rows (a request that failed before any reply has no latency: its send only)."""
    starts = rows["started_at"].astype(float).to_numpy()
    return in_flight(starts, starts + rows["latency_s"].astype(float).fillna(0).to_numpy())


def request_measures(samples: pd.DataFrame) -> pd.DataFrame:
    """Answered requests with each one's own output tokens/s added (what one user of the server sees)."""
    ok = samples[samples["error"].isna()]
    latency = ok["latency_s"].astype(float)
    return ok.assign(output_tokens_per_s=ok["completion_tokens"].astype(float) / latency.where(latency > 0))


def met_objective(ok: pd.DataFrame, slo: SloConfig) -> pd.Series:
    """Which answered requests met the objective: TTFT and mean inter-token latency within it. As guidellm's goodput,
    a request without the measure (not streamed; one chunk, no inter-token gap) did not show it met it."""
    met = pd.Series(True, index=ok.index)
    for limit_ms, column in ((slo.ttft_ms, "ttft_s"), (slo.itl_ms, "itl_s")):
        if limit_ms is not None:
            met &= ok[column].astype(float) * 1000 <= limit_ms  # NaN compares False
    return met


def _throughput_row(group: pd.DataFrame, slo: SloConfig | None) -> pd.Series:
    ok = request_measures(group)
    ends = group["started_at"] + group["latency_s"].fillna(0)
    wall = float(ends.max() - group["started_at"].min()) if len(group) else float("nan")
    per_s = 1 / wall if wall > 0 else float("nan")
    prompt = ok["prompt_tokens"].dropna().sum()
    cached = ok["cached_tokens"].dropna().sum()
    row = {
        "requests": len(group),
        "wall_s": wall,
        "requests_per_s": len(ok) * per_s,
        "output_tokens_per_s": ok["completion_tokens"].dropna().sum() * per_s,
        "user_tokens_per_s": ok["output_tokens_per_s"].median(),
    }
    for measure in ("latency", "ttft", "itl"):  # TTFT and ITL: streamed requests only
        values = ok[f"{measure}_s"].dropna().astype(float).to_numpy()
        for q in PERCENTILES:
            row[f"{measure}_p{q}_s"] = float(np.percentile(values, q)) if values.size else float("nan")
    judged = slo is not None and ok["ttft_s"].notna().any()  # both latencies are streaming's telemetry
    row["goodput_per_s"] = int(met_objective(ok, slo).sum()) * per_s if judged else float("nan")
    row["mean_prompt_tokens"] = ok["prompt_tokens"].dropna().mean() if len(ok) else float("nan")
    row["cache_hit_ratio"] = cached / prompt if prompt else float("nan")
    held = cell_in_flight(group)  # what the server was sent at once, beside the level asked for
    row["in_flight_mean"], row["in_flight_max"] = held.mean, held.max
    return pd.Series(row)


def throughput_table(df: pd.DataFrame, slo: SloConfig | None = None) -> pd.DataFrame:
    """One row per cell: the module docstring's figures; goodput NaN without an objective or without a streamed request."""
    if df.empty:
        return pd.DataFrame(columns=[*CELL_KEYS, *COLUMNS])
    out = df.groupby(CELL_KEYS, sort=True, dropna=False).apply(_throughput_row, slo, include_groups=False).reset_index()
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
    """What `evalctl compare` prints (a description; the gate's test is checks/throughput.py): per (comparison,
    candidate cell, measure on both sides) both values, their ratio, and the slowdown as a share of the reference's
    throughput: 1 - ratio for rates, 1 - 1/ratio for latencies (twice the latency is 0.5, as is half the rate)."""
    parts = [pd.DataFrame(columns=RATIO_COLUMNS)]
    for comp in comparisons:
        cells = match(comp)
        for measure in (*RATES, *LATENCIES):
            named = {f"{measure}_ref": "ref_value", measure: "cand_value", "requests_ref": "ref_requests", "requests": "cand_requests"}
            part = cells[[*CELL_KEYS, *named]].rename(columns=named)
            parts.append(part.assign(kind=comp.kind, comparison=comp.name, reference=comp.reference_label, measure=measure))
    table = pd.concat([p for p in parts if not p.empty] or parts, ignore_index=True)
    table = table[table["cand_value"].notna() & (table["ref_value"] > 0)]
    ratio = table["cand_value"] / table["ref_value"]
    slowdown = np.where(table["measure"].isin(RATES), 1 - ratio, 1 - 1 / ratio)
    return table.assign(ratio=ratio, slowdown=slowdown)[RATIO_COLUMNS].reset_index(drop=True)
