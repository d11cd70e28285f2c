"""Where a task's documents come from: the hub, or a local copy for offline nodes."""

from __future__ import annotations

import os
from pathlib import Path

from evalctl.errors import ConfigError

SPLIT_FILES = {"train": "train.jsonl", "test": "test.jsonl"}


def local_dataset_overrides(data_dir: Path) -> dict:
    """lm-eval task fields that read `train.jsonl`/`test.jsonl` from `data_dir`."""
    if not data_dir.is_dir():
        raise ConfigError(f"data dir {data_dir} does not exist or is not a directory")
    files = {}
    for split, name in SPLIT_FILES.items():
        path = data_dir / name
        if not path.is_file():
            raise ConfigError(f"data dir {data_dir} has no {name} (needs {', '.join(SPLIT_FILES.values())})")
        if not os.access(path, os.R_OK):
            raise ConfigError(f"data file {path} is not readable")
        files[split] = str(path.resolve())
    return {"dataset_path": "json", "dataset_name": None, "dataset_kwargs": {"data_files": files}}
