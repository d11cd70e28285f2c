"""Run folders built by hand with the real writers (manifest, parquet), for store and report tests."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd
from analysis.frames import sample_frame

from evalctl.manifest import Manifest, new_run_id, write_manifest
from evalctl.records import SAMPLES_FILE


def manifest_for(
    run_id: str, model: str, created_at: dt.datetime, status: str = "complete", servers: list | None = None, revision: str = "feedbeef"
) -> Manifest:
    return Manifest.model_validate(
        {
            "run_id": run_id,
            "created_at": created_at.isoformat(),
            "finished_at": created_at.isoformat(),
            "status": status,
            "evalctl": {"version": "0.1.0", "git_revision": "abc123"},
            "host": {"hostname": "test"},
            "config": {
                "model": model,
                "task": "gsm8k",
                "servers": [{"name": "cpu", "engine": "llamacpp", "gpu": "H100", "tp": 1}],
                "variants": [{"name": "default", "git_revision": revision}],
            },
            "servers": servers or [],
        }
    )


def make_run(
    root: Path,
    model: str,
    created_at: dt.datetime,
    samples: pd.DataFrame | list[dict],
    status: str = "complete",
    servers: list | None = None,
    revision: str = "feedbeef",
) -> Path:
    """A run folder as a finished sweep leaves it: manifest.json and samples.parquet."""
    run_id = new_run_id(model)
    run = root / run_id
    run.mkdir(parents=True, exist_ok=False)
    write_manifest(run, manifest_for(run_id, model, created_at, status, servers, revision))
    frame = samples if isinstance(samples, pd.DataFrame) else sample_frame(samples)
    frame.assign(run_id=run_id).to_parquet(run / SAMPLES_FILE, index=False)
    return run


def cell_rows(correct: list[bool], **cell) -> list[dict]:
    """One row per question of a cell; `correct[i]` is question i's strict and flexible outcome."""
    return [
        {"doc_id": i, "prompt_hash": f"h{i}", "strict_correct": ok, "flexible_correct": ok, "started_at": float(i), **cell}
        for i, ok in enumerate(correct)
    ]
