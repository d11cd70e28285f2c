"""Where along the prompt does cache-on accuracy fall off? Paired accuracy by length bin, and the cliff.

Cache-on and cache-off answers to the same question are paired and binned by the cache-on request's prompt tokens or
cached tokens; all shot counts of a (profile, variant, pass) pool into one axis (the bug this exists for depends on
length, not on the shot count as such).

The cliff is the smallest bin from which on cache-on accuracy is below cache-off by more than the tolerance,
significantly: the bin's own drop exceeds the tolerance, and the pooled pairs of that bin and every longer one (a noisy
dip that longer prompts do not share makes no cliff) show a drop above the tolerance, a one-sided exact McNemar
p <= alpha after Holm over every tail tested, and at least the gate's `min_n` distinct questions.

A description, never a verdict (the per-cell accuracy checks decide): the tail's p-value counts one question asked at
two shot counts as two pairs, which overstates the evidence when the same questions flip at every length (an audit at
n=200 without any drop: 4% false cliffs, 6% when a question's outcome repeats across lengths).
"""

from __future__ import annotations

from typing import Literal

import pandas as pd

from evalctl.analysis.accuracy import length_bin
from evalctl.analysis.multiple import holm
from evalctl.analysis.pairing import Comparison, Metric, align, judged_pairs, mcnemar_p
from evalctl.cell import CellKey
from evalctl.records import primary_metric

LengthColumn = Literal["prompt_tokens", "cached_tokens"]
GROUP = CellKey.columns("cache", "shots")
CLIFF_COLUMNS = [*GROUP, "column", "bin", "bin_lo", "bin_hi", "min_tokens", "n", "b", "c", "acc_drop", "p_value", "p_adjusted"]


def paired_by_length(cache_comparison: Comparison, column: LengthColumn = "prompt_tokens", metric: Metric | None = None) -> pd.DataFrame:
    """Per (profile, variant, pass, length bin): pairs, flips, both accuracies, the bin's one-sided
    McNemar p, and the same for the tail (this bin and all longer ones). `min_tokens` is the
    shortest length seen in the bin, sharper than its lower edge."""
    pairs = judged_pairs(align(cache_comparison), metric)
    pairs = pairs[pairs[column].notna()]
    col = f"{primary_metric(pairs, metric)}_correct"
    bin_lo, bin_hi = length_bin(pairs[column])
    ref, cand = pairs[f"{col}_ref"].astype(bool), pairs[col].astype(bool)
    data = pairs[[*GROUP, "doc_id"]].assign(
        bin_lo=bin_lo, bin_hi=bin_hi, tokens=pairs[column].astype(int), ref=ref, cand=cand, b=ref & ~cand, c=~ref & cand
    )
    table = (
        data.groupby([*GROUP, "bin_lo", "bin_hi"], sort=True)
        .agg(
            min_tokens=("tokens", "min"),
            n=("ref", "size"),
            b=("b", "sum"),
            c=("c", "sum"),
            hits_off=("ref", "sum"),
            hits_on=("cand", "sum"),
        )
        .reset_index()
    )
    table.insert(len(GROUP), "bin", [f"{lo}-{hi}" for lo, hi in zip(table["bin_lo"], table["bin_hi"])])
    table["acc_off"] = table.pop("hits_off") / table["n"]
    table["acc_on"] = table.pop("hits_on") / table["n"]
    table["acc_drop"] = (table["b"] - table["c"]) / table["n"]
    table["p_value"] = [mcnemar_p(int(b), int(c), "greater") for b, c in zip(table["b"], table["c"])]
    # Tail sums run from the longest bin back, within each group; questions counted distinct, not pairs: one question
    # asked at several shot counts is one question.
    rev = table.iloc[::-1].groupby(GROUP, sort=False)
    table["tail_n"] = rev["n"].cumsum().iloc[::-1].astype(int)
    table["tail_questions"] = [
        data.loc[(data[GROUP] == row[GROUP]).all(axis=1) & (data["bin_lo"] >= row["bin_lo"]), "doc_id"].nunique()
        for _, row in table.iterrows()
    ]
    for name in ("b", "c"):
        table[f"tail_{name}"] = rev[name].cumsum().iloc[::-1].astype(int)
    table["tail_drop"] = (table["tail_b"] - table["tail_c"]) / table["tail_n"]
    table["tail_p"] = [mcnemar_p(int(b), int(c), "greater") for b, c in zip(table["tail_b"], table["tail_c"])]
    return table


def find_cliffs(bins: pd.DataFrame, column: LengthColumn, tolerance: float, alpha: float, min_questions: int = 1) -> pd.DataFrame:
    """The cliff of each (profile, variant, pass), if any (module docstring), with its tail's pooled n, b, c, drop, one-sided
    McNemar p and Holm-adjusted p over all tails in `bins`; a tail with fewer than `min_questions` distinct questions
    (the gate passes its min_n) is not tested."""
    bins = bins[bins["tail_questions"] >= min_questions]
    bins = bins.assign(p_adjusted=holm(bins["tail_p"].to_numpy(dtype=float)))
    hit = bins[(bins["acc_drop"] > tolerance) & (bins["tail_drop"] > tolerance) & (bins["p_adjusted"] <= alpha)]
    first = hit.sort_values([*GROUP, "bin_lo"]).drop_duplicates(GROUP)  # each group's shortest qualifying bin
    tail = {"tail_n": "n", "tail_b": "b", "tail_c": "c", "tail_drop": "acc_drop", "tail_p": "p_value"}
    found = first.drop(columns=list(tail.values())).rename(columns=tail).assign(column=column)
    return found[CLIFF_COLUMNS].reset_index(drop=True)
