"""The flipped-questions table a regressed sweep prints: both answers shown, a missing one named."""

from __future__ import annotations

import pandas as pd

from evalctl.report.terminal import flips_view


def test_an_answer_the_metric_could_not_extract_reads_none_not_nan():
    flipped = pd.DataFrame(
        {
            "profile": ["cpu"], "variant": ["default"], "cache": ["on"], "shots": [50], "pass_index": [1],
            "doc_id": [0], "direction": ["right->wrong"], "question": ["zolefe:"], "target": ["999"],
            "reference_answer": ["999"], "reference_response": [" 999"],
            "candidate_answer": [float("nan")], "candidate_response": [" The value of"],
        }
    )  # fmt: skip
    row = flips_view(flipped).iloc[0]
    assert row["reference answer"] == "999 | 999"
    assert row["candidate answer"] == "(none) | The value of"
    assert "nan" not in " ".join(map(str, row.to_numpy()))
