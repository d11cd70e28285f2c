"""Hand-built sample frames with the real record schema."""

from __future__ import annotations

import pandas as pd

from evalctl.records import COLUMNS


def sample_frame(rows: list[dict]) -> pd.DataFrame:
    defaults = dict(
        run_id="r", profile="cpu", variant="default", cache="on", shots=8, pass_index=1, doc_id=0,
        prompt_hash="h", question="q", target="1", prewarmed=False, prompt_chars=10, prompt_tokens=100,
        cached_tokens=0, completion_tokens=10, started_at=0.0, latency_s=1.0, ttft_s=None,
        finish_reason="stop", response="#### 1", strict_answer="1", flexible_answer="1",
        strict_correct=True, flexible_correct=True, attempts=1, error=None, error_kind=None,
    )  # fmt: skip
    return pd.DataFrame([{**defaults, **r} for r in rows], columns=COLUMNS)
