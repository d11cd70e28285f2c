"""Per-request throughput: a slowdown beyond `max_throughput_drop`, by rank tests, Holm over its own family.

The comparisons are accuracy's (`pairing.Comparison`), so a throughput verdict belongs to the cell whose accuracy is
judged. A ratio of two cell-wide figures is one draw of a noisy measurement; a cell's requests are many draws, so the
check tests them. Each measure goes on a log "time" scale, t = log(latency) or -log(rate), where a slowdown by the
tolerated fraction s is a shift of -log(1 - s). Two one-sided Wilcoxon-Mann-Whitney tests (`scipy.stats.mannwhitneyu`)
of the candidate's t, shifted back by that amount, against the reference's:

- slower (regression): H0 shift <= -log(1 - s); small p says the slowdown exceeds s;
- within (pass): H0 shift >= -log(1 - s); small p says it is below s.

Inverting them gives the rank-based (Hodges-Lehmann) bounds on the ratio, so "p <= alpha" is "the interval excludes
the threshold". Assumptions: requests are independent, and the candidate's distribution is the reference's scaled by
a factor; concurrency and a shared machine weaken the first, so the median ratio is a description and the p-values
are approximate.

Another job on the machine moves speed more than any build does, so each cell records the share of the CPUs other
processes used (`execution.host_load`). Where one side had less than 1 - `max_host_cpu_loss` of the other's free
share, the load could decide the finding: a slower candidate is no regression, a slower reference no pass
(inconclusive, saying why). Relative, not absolute: on 2 cores a neighbour going from 53% to 73% of the CPUs leaves
43% less for the server, and a 2x slowdown of a healthy build was seen there (scripts/conversation_seeds.py).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.stats import mannwhitneyu

from evalctl.analysis.checks.base import Check, GateCheck, GateInputs
from evalctl.analysis.drop_rule import decide
from evalctl.analysis.gate_policy import GatePolicy
from evalctl.analysis.pairing import Comparison
from evalctl.analysis.throughput import request_measures
from evalctl.cell import CellKey
from evalctl.runs import Run

# Per-request measures; True where higher is better.
MEASURES = {"output_tokens_per_s": True, "latency_s": False, "ttft_s": False}
HostLoads = dict[tuple[str, CellKey], float]  # (run id, cell) -> share of the host's CPUs other work used


def host_loads(*runs: Run | None) -> HostLoads:
    """Each cell's recorded `host_other_cpu`, the largest where the cell ran more than once (a restart, a resume)."""
    loads: HostLoads = {}
    for run in filter(None, runs):
        for server in run.manifest.servers:
            for entry in server.cells:
                if entry.host_other_cpu is not None:
                    key = (run.run_id, server.cell_of(entry))
                    loads[key] = max(loads.get(key, 0.0), entry.host_other_cpu)
    return loads


def _load_of(loads: HostLoads, rows: pd.DataFrame) -> float:
    first = rows.iloc[0]
    return loads.get((first["run_id"], CellKey.from_row(first)), math.nan)


def _time_scale(values: pd.Series, higher_better: bool) -> np.ndarray:
    x = values.astype(float).to_numpy()
    x = np.log(x[np.isfinite(x) & (x > 0)])
    return -x if higher_better else x


def slowdown_tests(comparisons: list[Comparison], tolerance: float, loads: HostLoads | None = None) -> pd.DataFrame:
    """One row per (comparison, candidate cell, measure) measured on both sides: request counts, medians, their ratio
    and the slowdown it implies, the module docstring's two p-values, each side's host load (NaN: not recorded)."""
    loads = loads or {}
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
                ref_median, cand_median = (float(np.exp(np.median(t) * (-1 if higher_better else 1))) for t in (t_ref, t_cand))
                ratio = cand_median / ref_median
                rows.append(
                    {
                        "kind": comp.kind,
                        "comparison": comp.name,
                        "reference": comp.reference_label,
                        **cell,
                        "measure": measure,
                        "ref_requests": t_ref.size,
                        "cand_requests": t_cand.size,
                        "ref_median": ref_median,
                        "cand_median": cand_median,
                        "ratio": ratio,
                        "slowdown": 1 - ratio if higher_better else 1 - 1 / ratio,
                        "p_slower": float(mannwhitneyu(t_cand - shift, t_ref, alternative="greater").pvalue),
                        "p_within": float(mannwhitneyu(t_cand - shift, t_ref, alternative="less").pvalue),
                        "ref_host_other": _load_of(loads, ref),
                        "cand_host_other": _load_of(loads, cand),
                    }
                )
    return pd.DataFrame(rows)


def _confounded(row: pd.Series, state: str, limit: float | None) -> str | None:
    """Why the host's other work, not the build, could have decided `state` (module docstring); None if it could not."""
    free_ref, free_cand = 1 - row["ref_host_other"], 1 - row["cand_host_other"]  # NaN (not recorded) compares False
    if limit is None or not (
        state == "regression" and free_cand < (1 - limit) * free_ref or state == "pass" and free_ref < (1 - limit) * free_cand
    ):
        return None
    side = "this cell" if free_cand < free_ref else "its reference"
    return (
        f"the host was busier with other work during {side}: other processes left {free_cand:.0%} of its CPUs free"
        f" here, {free_ref:.0%} during {row['reference']} (max_host_cpu_loss {limit:.0%}), so the speeds do not compare"
    )


def throughput_checks(comparisons: list[Comparison], policy: GatePolicy, loads: HostLoads | None = None) -> list[Check]:
    """`slowdown_tests` at `max_throughput_drop`: regression Holm over the throughput checks, pass only when shown
    within it, neither where the cells' host loads could have decided it (`_confounded`)."""
    if policy.max_throughput_drop is None:
        return []
    tol = policy.max_throughput_drop
    table = slowdown_tests(comparisons, tol, loads)
    if table.empty:
        return []
    tested = (table[["ref_requests", "cand_requests"]].min(axis=1) >= policy.min_n).to_numpy()
    status, p_adjusted = decide(table["p_slower"], table["p_within"], tested, policy.alpha)
    checks = []
    for (_, row), state, p_adj, ok in zip(table.iterrows(), status, p_adjusted, tested):
        n = int(min(row["ref_requests"], row["cand_requests"]))
        detail = (
            f"median {row['measure']} {row['cand_median']:.3g} vs {row['reference']} {row['ref_median']:.3g} "
            f"(ratio {row['ratio']:.2f}, slowdown {row['slowdown']:.1%}; tolerated {tol:.0%})"
        )
        reason = {
            "regression": f"slower beyond the tolerance: rank test p_adj {p_adj:.2g} <= {policy.alpha}; {detail}",
            "pass": f"within the tolerance: rank test p {row['p_within']:.2g} <= {policy.alpha}; {detail}",
            "inconclusive": f"cannot tell the slowdown from {tol:.0%} (p_adj {p_adj:.2g}, p within {row['p_within']:.2g}); {detail}"
            if ok
            else f"only {n} requests timed (min_n {policy.min_n}); {detail}",
        }[state]
        confound = _confounded(row, state, policy.max_host_cpu_loss)
        if confound:
            state, reason = "inconclusive", f"{confound}; {reason}"
        checks.append(
            Check(
                f"{row['comparison']}: {row['measure']}",
                "throughput",
                state,
                reason,
                **CellKey.from_row(row).as_dict(),
                metric=f"{row['measure']} median ratio",
                value=float(row["ratio"]),
                threshold=1 - tol if MEASURES[row["measure"]] else 1 / (1 - tol),
                p_value=float(row["p_slower"]),
                p_adjusted=float(p_adj),
                n=n,
                comparison=row["comparison"],
            )
        )
    return checks


class Throughput(GateCheck):
    kind = "throughput"
    order = 40
    family = "throughput"

    def results(self, inputs: GateInputs) -> list[Check]:
        # A higher concurrency level is slower per request by design: its throughput is judged per level, not against the lowest.
        comparisons = [c for c in inputs.comparisons if c.kind != "concurrency"]
        return throughput_checks(comparisons, inputs.policy, host_loads(inputs.run, inputs.baseline))


CHECK = Throughput()  # listed in analysis.checks.CHECKS
