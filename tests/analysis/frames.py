"""Hand-built sample frames with the real record schema."""

from __future__ import annotations

import pandas as pd

from evalctl.config import validated
from evalctl.manifest import Manifest, PlannedCell
from evalctl.plan import expand
from evalctl.records import COLUMNS


def sample_frame(rows: list[dict]) -> pd.DataFrame:
    defaults = dict(
        run_id="r", profile="cpu", variant="default", cache="on", shots=8, concurrency=4, pass_index=1, doc_id=0,
        prompt_hash="h", question="q", target="1", prewarmed=False, prompt_chars=10, prompt_tokens=100,
        cached_tokens=0, completion_tokens=10, started_at=0.0, latency_s=1.0, ttft_s=None,
        finish_reason="stop", response="#### 1", strict_answer="1", flexible_answer="1",
        strict_correct=True, flexible_correct=True, attempts=1, error=None, error_kind=None,
    )  # fmt: skip
    # gsm8k's two metrics, as a sweep of it records them
    metrics = ["strict_answer", "strict_correct", "flexible_answer", "flexible_correct"]
    return pd.DataFrame([{**defaults, **r} for r in rows], columns=[*COLUMNS, *metrics])


def sweep_frame(
    n: int = 200,
    shots: tuple[int, ...] = (8, 16, 20),
    to_wrong: dict[int, set[int]] | None = None,
    to_right: dict[int, set[int]] | None = None,
    run_id: str = "r",
    base_accuracy: float = 0.8,
) -> pd.DataFrame:
    """A cache on/off sweep over the same `n` questions. Cache off answers the first
    `base_accuracy * n` questions right; cache on does the same except for the docs in
    `to_wrong[shots]` (flipped right->wrong) and `to_right[shots]` (wrong->right).
    Prompts grow with shots (150 tokens per shot); cache-on requests reuse all but 60."""
    to_wrong, to_right = to_wrong or {}, to_right or {}
    rows, clock = [], 0.0
    for cache in ("off", "on"):
        for s in shots:
            for doc in range(n):
                right = doc < int(base_accuracy * n)
                if cache == "on":
                    right = (right and doc not in to_wrong.get(s, set())) or doc in to_right.get(s, set())
                answer = str(doc) if right else "-1"
                tokens = 150 * s + doc % 50
                rows.append(
                    dict(
                        run_id=run_id, cache=cache, shots=s, doc_id=doc, prompt_hash=f"{s}-{doc}", question=f"question {doc}?",
                        target=str(doc), prompt_tokens=tokens, cached_tokens=tokens - 60 if cache == "on" else 0, started_at=clock,
                        latency_s=1.0, response=f"#### {answer}", strict_answer=answer, flexible_answer=answer, strict_correct=right,
                        flexible_correct=right,
                    )
                )  # fmt: skip
                clock += 0.1
    return sample_frame(rows)


def manifest_for(df: pd.DataFrame, status: str = "complete", limit: int | None = None) -> Manifest:
    """A manifest whose config and plan hold the cells of `df` (profile cpu; its variants, the first the baseline; its
    passes), each planned with `limit` questions (default: as many as `df` holds)."""
    config = {
        "model": "test",
        "shots": sorted(int(s) for s in set(df["shots"])),
        "cache": sorted(set(df["cache"])),
        "passes": int(df["pass_index"].max()),
        "variants": [{"name": name} for name in dict.fromkeys(df["variant"])],
        "limit": limit if limit is not None else int(df["doc_id"].nunique()),
        "servers": [{"name": "cpu", "engine": "llamacpp", "model_path": "bundled:smollm2-135m"}],
    }
    cells = [cell for launch in expand(validated(config)) for cell in launch.cells]
    plan = [PlannedCell(**cell.as_dict(), questions=config["limit"], prompts="") for cell in cells]
    return Manifest(run_id=str(df["run_id"].iloc[0]), status=status, config=config, plan=plan)
