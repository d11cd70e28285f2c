"""Throughput of a candidate cell relative to its reference: candidate/baseline, cache on/off.

The comparisons are the same `pairing.Comparison`s as for accuracy, applied to per-cell
throughput tables, so a throughput ratio always belongs to the cell whose accuracy is judged.
Throughput is one measurement per cell (no per-question pairing), so the check is a ratio
against a tolerance, not a test.
"""

from __future__ import annotations

import pandas as pd

from evalctl.analysis.pairing import Comparison, match
from evalctl.records import CELL_KEYS

# Higher is better for rates, lower for latencies; `slowdown` puts both on one scale.
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
    """Long table, one row per (comparison, candidate cell, measure): both values, candidate/reference
    ratio, and the slowdown as a fraction of the reference throughput: 1 - ratio for rates,
    1 - 1/ratio for latencies (a latency twice as long is a slowdown of 0.5, as is half the rate).
    Measures missing on either side (no streamed TTFT) are left out.
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
