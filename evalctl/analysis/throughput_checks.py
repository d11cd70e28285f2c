"""Is a candidate cell slower than its reference beyond the tolerance? Per-request rank tests.

The comparisons are the same `pairing.Comparison`s as for accuracy, so a throughput verdict
always belongs to the cell whose accuracy is judged. One ratio of two cell-wide figures is
one draw of a noisy measurement (a shared machine, a neighbour's burst); the requests of a
cell are many draws, so the check tests them.

Each measure is put on a log "time" scale, t = log(latency) or -log(rate), where a slowdown
by the tolerated fraction s (rate times 1 - s, latency divided by 1 - s) is a shift of
-log(1 - s). Two one-sided Wilcoxon-Mann-Whitney tests of the candidate's t, shifted back by
that amount, against the reference's t (`scipy.stats.mannwhitneyu`):

- slower (regression): H0: shift <= -log(1 - s); small p says the slowdown exceeds s;
- within (pass): H0: shift >= -log(1 - s); small p says it is below s.

Inverting them gives the rank-based (Hodges-Lehmann) confidence bounds on the ratio, so
"the p-value is <= alpha" is "the interval excludes the threshold". Assumptions: requests
are independent, and the candidate's distribution is the reference's scaled by a factor
(a shift on the log scale); concurrency and a shared machine weaken the first, so the
reported median ratio is a description and the p-values are approximate.

`throughput_ratios` is the description `evalctl compare` prints: cell-wide rates and
latency percentiles, candidate over reference, no test.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.stats import mannwhitneyu

from evalctl.analysis.pairing import Comparison, match
from evalctl.cell import CellKey
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

# Per-request measures; True where higher is better.
MEASURES = {"output_tokens_per_s": True, "latency_s": False, "ttft_s": False}
TEST_COLUMNS = [
    "kind",
    "comparison",
    "reference",
    *CELL_KEYS,
    "measure",
    "ref_requests",
    "cand_requests",
    "ref_median",
    "cand_median",
    "ratio",
    "slowdown",
    "p_slower",
    "p_within",
]


def request_measures(samples: pd.DataFrame) -> pd.DataFrame:
    """Answered requests with their per-request measures (`MEASURES`) added."""
    ok = samples[samples["error"].isna()]
    latency = ok["latency_s"].astype(float)
    return ok.assign(output_tokens_per_s=ok["completion_tokens"].astype(float) / latency.where(latency > 0))


def _time_scale(values: pd.Series, higher_better: bool) -> np.ndarray:
    x = values.astype(float).to_numpy()
    x = np.log(x[np.isfinite(x) & (x > 0)])
    return -x if higher_better else x


def slowdown_tests(comparisons: list[Comparison], tolerance: float) -> pd.DataFrame:
    """One row per (comparison, candidate cell, measure): request counts, medians, the median
    ratio (candidate / reference), the slowdown it implies (1 - ratio for rates, 1 - 1/ratio
    for latencies) and the two one-sided p-values of the module docstring. Measures missing
    on either side (TTFT without streaming) are left out."""
    shift = -math.log(1 - tolerance)
    rows = []
    for comp in comparisons:
        reference = request_measures(comp.reference)
        references = dict(iter(reference.groupby(list(comp.on), sort=False)))
        for key, cand in CellKey.groups(request_measures(comp.candidate)):
            cell = key.as_dict()
            ref = references.get(tuple(cell[k] for k in comp.on))
            if ref is None:
                continue
            for measure, higher_better in MEASURES.items():
                t_ref, t_cand = _time_scale(ref[measure], higher_better), _time_scale(cand[measure], higher_better)
                if not (t_ref.size and t_cand.size):
                    continue
                ratio = math.exp(np.median(t_cand) - np.median(t_ref)) ** (-1 if higher_better else 1)
                rows.append(
                    {
                        "kind": comp.kind,
                        "comparison": comp.name,
                        "reference": comp.reference_label,
                        **cell,
                        "measure": measure,
                        "ref_requests": t_ref.size,
                        "cand_requests": t_cand.size,
                        "ref_median": float(np.exp(np.median(t_ref) * (-1 if higher_better else 1))),
                        "cand_median": float(np.exp(np.median(t_cand) * (-1 if higher_better else 1))),
                        "ratio": ratio,
                        "slowdown": 1 - ratio if higher_better else 1 - 1 / ratio,
                        "p_slower": float(mannwhitneyu(t_cand - shift, t_ref, alternative="greater").pvalue),
                        "p_within": float(mannwhitneyu(t_cand - shift, t_ref, alternative="less").pvalue),
                    }
                )
    return pd.DataFrame(rows, columns=TEST_COLUMNS)


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
