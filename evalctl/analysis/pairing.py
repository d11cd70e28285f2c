"""Pair cells that answered the same questions, and test them with exact McNemar.

Only the discordant pairs (exactly one side right) carry information about a difference; with 1319
GSM8K questions and a few dozen flips this is far more sensitive than a two-proportion test, which
throws the pairing away.

A *comparison* names a reference and a candidate slice of a frame and the cell keys that must
match between them (cache on vs off: all but the cache; a concurrency level vs the lowest: all but
the level; and so on). The same comparison pairs sample frames per question and per-cell tables
(throughput) per cell, so the two never disagree on what is paired. After matching, the
candidate's columns keep their names and the reference's get a `_ref` suffix: every result row is
labelled by the candidate cell it judges.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal, get_args

import pandas as pd
from scipy.stats import binom

from evalctl.analysis.drop_rule import drop_bounds
from evalctl.analysis.intervals import share_bounds
from evalctl.cell import CellKey
from evalctl.errors import BadInput
from evalctl.records import CELL_KEYS, Metric, primary_metric

# What differs between the two sides of a comparison: the cache mode, the variant, the pass, the server profile, or the run;
# or a cache-on cell against the A/A replica of its cache-off cell (`analysis.floor`).
ComparisonKind = Literal["cache", "variant", "pass", "concurrency", "profile", "run", "floor"]
# A question is the same question only with the same prompt: same shots, doc and few-shot text.
QUESTION_KEYS = ["doc_id", "prompt_hash"]
Alternative = Literal["two-sided", "greater", "less"]


def mcnemar_p(b: int, c: int, alternative: Alternative = "two-sided") -> float:
    """The exact (conditional) McNemar p-value of `b` right->wrong and `c` wrong->right flips: under H0,
    b ~ Binomial(b + c, 1/2). Exact rather than chi-square: regressions are often judged on a handful of flips.

    `greater` (candidate worse): P(X >= b); `less`: P(X <= b); `two-sided`: min(1, 2 min(P(X <= b), P(X >= b))),
    `scipy.stats.binomtest`'s for this symmetric null. No discordant pair: p = 1.
    """
    if min(b, c) < 0 or alternative not in get_args(Alternative):
        raise ValueError(f"need counts >= 0 and an alternative of {get_args(Alternative)}, got {b}, {c}, {alternative!r}")
    n = b + c
    if n == 0:
        return 1.0
    if alternative == "greater":
        return float(binom.sf(b - 1, n, 0.5))
    if alternative == "less":
        return float(binom.cdf(b, n, 0.5))
    return min(1.0, 2.0 * float(binom.cdf(min(b, c), n, 0.5)))  # the mirror tail doubled; b == c caps at 1


@dataclass(frozen=True)
class Comparison:
    kind: ComparisonKind
    name: str  # what a reader sees: "cache on vs off"
    reference: pd.DataFrame
    candidate: pd.DataFrame
    on: tuple[str, ...]  # cell keys that must be equal between reference and candidate
    reference_label: str  # how the reference cell differs: "cache off"


def _against(df: pd.DataFrame, kind: ComparisonKind, column: str, reference: object) -> list[Comparison]:
    """Each other value of `column` vs `reference`: "pass 2 vs 1", its reference labelled "pass 1"."""
    return [
        Comparison(
            kind,
            f"{kind} {value} vs {reference}",
            df[df[column] == reference],
            df[df[column] == value],
            tuple(CellKey.columns(column)),
            f"{kind} {reference}",
        )
        for value in sorted(set(df[column]))
        if value != reference
    ]


def within_run(df: pd.DataFrame, baseline_variant: str | None = None, baseline_profile: str | None = None) -> list[Comparison]:
    """The comparisons one run supports, those with both slices: cache on vs off, each variant vs the baseline one,
    each server profile vs the reference one (both default to the alphabetically first; callers pass the config's
    first), pass k vs pass 1, each concurrency level vs the lowest (the same prompts at each)."""
    out = _against(df, "cache", "cache", "off") if {"on", "off"} <= set(df["cache"]) else []
    for kind, preferred in (("variant", baseline_variant), ("profile", baseline_profile)):
        values = sorted(set(df[kind]))
        out += _against(df, kind, kind, preferred if preferred in values else values[0]) if values else []
    out += _against(df, "pass", "pass_index", 1)
    return out + (_against(df, "concurrency", "concurrency", min(df["concurrency"])) if len(df) else [])


RUN_VS_BASELINE = "run vs baseline"


def between_runs(baseline: pd.DataFrame, candidate: pd.DataFrame) -> Comparison:
    """Candidate run vs baseline run, cell by cell."""
    return Comparison("run", RUN_VS_BASELINE, baseline, candidate, tuple(CELL_KEYS), "baseline run")


def match(comparison: Comparison, extra_keys: Iterable[str] = ()) -> pd.DataFrame:
    """Reference and candidate rows inner-joined on the comparison's cell keys (+ `extra_keys`), other columns as
    `<col>_ref` and `<col>`; of a key's duplicate rows (a record written twice) the last."""
    keys = [*comparison.on, *extra_keys]
    ref = comparison.reference.drop_duplicates(keys, keep="last")
    cand = comparison.candidate.drop_duplicates(keys, keep="last")
    merged = ref.merge(cand, on=keys, how="inner", suffixes=("_ref", "_cand"))
    return merged.rename(columns={c: c[: -len("_cand")] for c in merged.columns if c.endswith("_cand")})


def align(comparison: Comparison) -> pd.DataFrame:
    """Question-by-question pairs of a comparison of sample frames."""
    return match(comparison, QUESTION_KEYS)


def align_runs(baseline: pd.DataFrame, candidate: pd.DataFrame) -> pd.DataFrame:
    """Pairs between two runs; raises BadInput when they share no question in any cell."""
    pairs = align(between_runs(baseline, candidate))
    if pairs.empty:
        raise BadInput(
            f"the runs share no questions: {baseline['doc_id'].nunique()} and {candidate['doc_id'].nunique()} questions, "
            "no (cell, doc_id, prompt_hash) in common; were they run with the same task, shots and few-shot mode?"
        )
    return pairs


def judged_pairs(pairs: pd.DataFrame, metric: Metric | None = None) -> pd.DataFrame:
    """The pairs a paired test judges: the reference answered, the candidate answered or failed. A candidate's
    error counts as a wrong answer (`cand_error`): left out, errors would hide the questions a broken server
    loses; a reference error says nothing about the candidate, so its pair is left out."""
    col = f"{primary_metric(pairs, metric)}_correct"
    ref_ok = pairs["error_ref"].isna() & pairs[f"{col}_ref"].notna()
    failed = pairs["error"].notna() | pairs[col].isna()
    judged = pairs[ref_ok].assign(cand_error=failed[ref_ok])
    return judged.assign(**{col: judged[col].where(~judged["cand_error"], False)})


def _paired_row(group: pd.DataFrame, metric: Metric) -> pd.Series:
    col = f"{metric}_correct"
    ref = group[f"{col}_ref"].astype(bool).to_numpy()
    cand = group[col].astype(bool).to_numpy()
    b, c = int((ref & ~cand).sum()), int((~ref & cand).sum())
    n = len(group)
    nan = float("nan")
    return pd.Series(
        {
            "n": n,
            "b": b,
            "cand_errors": int(group["cand_error"].sum()),
            "c": c,
            **share_bounds("ref", int(ref.sum()), n),
            **share_bounds("cand", int(cand.sum()), n),
            "acc_drop": (b - c) / n if n else nan,
            "drop_upper": float(drop_bounds(b, c, n, 0.05)[1]) if n else nan,  # the gate's interval, one-sided 95%
            "p_value": mcnemar_p(b, c, "greater"),
            "p_two_sided": mcnemar_p(b, c),
        }
    )


PAIRED_COLUMNS = [
    "kind",
    "comparison",
    "reference",
    *CELL_KEYS,
    "n",
    "b",
    "c",
    "cand_errors",
    "ref_acc",
    "ref_lo",
    "ref_hi",
    "cand_acc",
    "cand_lo",
    "cand_hi",
    "acc_drop",
    "drop_upper",
    "p_value",
    "p_two_sided",
]


def paired_table(comparisons: Iterable[Comparison], metric: Metric | None = None) -> pd.DataFrame:
    """One row per candidate cell of each comparison: judged pairs n (`judged_pairs`: a candidate's
    request error counts as wrong; `cand_errors` of them), flips b (right->wrong) and c
    (wrong->right), both accuracies with 95% Wilson bounds, the paired drop (reference minus
    candidate) with its 95% upper bound (Tango), and exact McNemar p-values: one-sided for a drop
    (`p_value`) and two-sided. No multiple-comparison adjustment here: the caller picks the family."""
    parts = []
    for comp in comparisons:
        pairs = judged_pairs(align(comp), metric)
        if pairs.empty:
            continue
        scored_by = primary_metric(comp.candidate, metric)
        table = pairs.groupby(CELL_KEYS, sort=True).apply(_paired_row, metric=scored_by, include_groups=False).reset_index()
        table = table.astype({"n": int, "b": int, "c": int, "cand_errors": int})
        parts.append(table.assign(kind=comp.kind, comparison=comp.name, reference=comp.reference_label))
    if not parts:
        return pd.DataFrame(columns=PAIRED_COLUMNS)
    return pd.concat(parts, ignore_index=True)[PAIRED_COLUMNS]


def unpaired_cells(comparison: Comparison, metric: Metric | None = None) -> pd.DataFrame:
    """Candidate cells of a comparison with no judged pair, and why (`reason`): the gate makes them inconclusive,
    where left out they would pass silently."""
    cells = comparison.candidate[CELL_KEYS].drop_duplicates()
    judged = judged_pairs(align(comparison), metric)[CELL_KEYS].drop_duplicates()
    missing = cells.merge(judged, how="left", indicator=True).query("_merge == 'left_only'").drop(columns="_merge")
    if missing.empty:
        return missing.assign(reason=[])
    shared = match(replace(comparison, reference=comparison.reference[list(comparison.on)].drop_duplicates(),
                           candidate=missing))[CELL_KEYS].assign(has_cell=True)  # fmt: skip
    asked = align(comparison)[CELL_KEYS].drop_duplicates().assign(has_question=True)
    missing = missing.merge(shared, how="left").merge(asked, how="left")
    label = comparison.reference_label
    reasons = [
        f"no question of this cell was answered by the {label}" if pd.notna(q)
        else f"the {label} asked other prompts in this cell (no common doc_id and prompt_hash): "
        "other shots, few-shot mode or task data?"
        if pd.notna(c) else f"the {label} has no such cell"
        for c, q in zip(missing["has_cell"], missing["has_question"])
    ]  # fmt: skip
    return missing[CELL_KEYS].assign(reason=reasons).reset_index(drop=True)
