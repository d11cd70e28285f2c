"""Requests the server held at once, measured from the records' timings (not the level the client was asked for).

A request is in flight from its send (`started_at`) to its last byte (`started_at + latency_s`); over a
cell's window (first send to last finish) this gives the time-weighted mean and the most at any instant.
Queued requests count: a level of 32 against a server with 4 slots still shows 32 (what the engine batched
is bounded by its slots, the manifest's `parallel` / `max_running_requests`); a client that cannot keep
the level up (too few requests, a slow client) shows a lower mean.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


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
