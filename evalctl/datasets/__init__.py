"""Task data shipped inside the package (pinned, offline, a sweep's default): per task `train.jsonl` and `test.jsonl`
with the data's LICENSE and a SOURCE.md naming the upstream commit and the files' sha256."""

from __future__ import annotations

from pathlib import Path


def packaged_data_dir(task: str) -> Path | None:
    """The packaged copy of `task`'s data, or None when the package ships none for it."""
    folder = Path(__file__).resolve().parent / task
    return folder if (folder / "test.jsonl").is_file() else None
