"""The questions whose outcome flipped between two paired sets of samples."""

from __future__ import annotations

import pandas as pd

from evalctl.cell import CellKey
from evalctl.records import primary_metric

RIGHT_TO_WRONG, WRONG_TO_RIGHT = "right->wrong", "wrong->right"
FLIP_COLUMNS = [
    "doc_id",
    "direction",
    "question",
    "target",
    "reference_answer",
    "candidate_answer",
    "reference_response",
    "candidate_response",
]


def flipped_questions(reference: pd.DataFrame, candidate: pd.DataFrame, on: list[str], metric: str | None = None) -> pd.DataFrame:
    """Pairs (same `on` keys, doc and prompt) scored in both (an error is no answer, so never a flip) where exactly one
    is correct (by `metric`, default the task's first); right->wrong (the candidate lost it) first: they matter most."""
    metric = primary_metric(candidate, metric)
    keys = [*on, "doc_id", "prompt_hash"]
    cols = [*keys, "question", "target", f"{metric}_answer", "response", f"{metric}_correct"]

    def scored(df: pd.DataFrame) -> pd.DataFrame:
        return df.loc[df["error"].isna(), cols]

    pairs = scored(reference).merge(scored(candidate).drop(columns=["question", "target"]), on=keys, suffixes=("_ref", "_cand"))
    ref_ok = pairs[f"{metric}_correct_ref"].astype(bool)
    cand_ok = pairs[f"{metric}_correct_cand"].astype(bool)
    flipped = ref_ok != cand_ok
    flips = pairs[flipped].assign(direction=ref_ok[flipped].map({True: RIGHT_TO_WRONG, False: WRONG_TO_RIGHT}).to_numpy())
    flips = flips.rename(
        columns={
            f"{metric}_answer_ref": "reference_answer",
            f"{metric}_answer_cand": "candidate_answer",
            "response_ref": "reference_response",
            "response_cand": "candidate_response",
        }
    )
    out = flips[[*on, *FLIP_COLUMNS]]
    return out.sort_values(["direction", *on, "doc_id"], kind="stable").reset_index(drop=True)


def regressed_cell_flips(samples: pd.DataFrame, checks: list, metric: str) -> pd.DataFrame:
    """The cache off -> on flips of the cells a per-cell gate check found regressed (`checks`: the gate's)."""
    # Any per-cell check that regressed (accuracy, or an invalid-answer cap a forgotten prefix also trips) names a cell.
    named = CellKey.columns("cache")
    cells = {tuple(getattr(c, k) for k in named) for c in checks if c.shots is not None and c.status == "regression"}
    chosen = samples[[k in cells for k in zip(*(samples[k] for k in named))]]
    return flipped_questions(chosen[chosen.cache == "off"], chosen[chosen.cache == "on"], named, metric)
