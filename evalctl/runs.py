"""Open a run folder for analysis: its manifest and samples, or one clear error."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from evalctl.analysis.gate import RunFrames
from evalctl.manifest import read_manifest
from evalctl.records import COLUMNS, load_noise, load_samples


class RunFolderError(ValueError):
    """A run folder that is missing, incomplete on disk, or corrupt; the message says which."""


def load_run(run_dir: Path) -> RunFrames:
    if not run_dir.is_dir():
        raise RunFolderError(f"{run_dir} is not a directory")
    try:
        manifest = read_manifest(run_dir)
        samples = load_samples(run_dir)
        noise = load_noise(run_dir)
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise RunFolderError(f"cannot read run folder {run_dir}: {exc}") from None
    if not isinstance(manifest, dict):
        raise RunFolderError(f"{run_dir}/manifest.json is corrupt: not a JSON object")
    missing = [c for c in COLUMNS if c not in samples.columns]
    if missing:
        raise RunFolderError(f"{run_dir}: samples lack columns {missing}: not an evalctl run, or written by an incompatible version")
    return RunFrames(str(manifest.get("run_id") or run_dir.name), samples, manifest, noise)


def chunked_prefill_size(manifest: dict) -> int | None:
    """The engine's chunked-prefill size, when a server profile sets it (the first one that does)."""
    for profile in (manifest.get("config") or {}).get("servers") or []:
        size = profile.get("chunked_prefill_size") if isinstance(profile, dict) else None
        if isinstance(size, int) and size > 0:
            return size
    return None
