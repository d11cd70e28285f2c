"""The loaded run: one run folder as every reader sees it (analysis, gate, reports, resume), or one clear error.

A run folder another process is writing (`writers`: see `runlock`) is read as a snapshot: the
manifest and samples.parquet are only ever replaced whole (`fsio`), and a live run's samples
come from its records files (every line written through; a torn last line is skipped), so a reader
sees the rows answered so far, never a half-written file.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from evalctl.agreement import AGREEMENT, with_agreement
from evalctl.errors import RunFolderError
from evalctl.manifest import Manifest, read_manifest
from evalctl.records import COLUMNS, Metric, load_noise, load_samples, metric_names, primary_metric
from evalctl.runlock import Holder, writers


@dataclass(eq=False)
class Run:
    """A run folder: its manifest and its samples, each loaded once on first use (its summary tables:
    `analysis.summary.run_summary`; a run is data, analysis reads it, never the other way round).

    `samples` may be given (tests, or a caller that already holds them); otherwise they are
    read from the folder (`records.load_samples`) when first asked for.
    """

    path: Path
    manifest: Manifest
    given_samples: pd.DataFrame | None = field(default=None, repr=False)
    given_noise: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def run_id(self) -> str:
        return self.manifest.run_id

    @property
    def config(self) -> dict[str, Any]:
        """The run's config as recorded (secrets redacted)."""
        return self.manifest.config

    @property
    def task(self) -> str:
        """The task it ran (a run from before the config named one ran GSM8K)."""
        return self.config.get("task") or "gsm8k"

    @cached_property
    def writers(self) -> list[Holder]:
        """Who is writing the run folder now (empty: nobody), as first asked."""
        return [] if self.given_samples is not None else writers(self.path)

    @property
    def live(self) -> bool:
        """Another process is writing the run: what a reader sees is the rows so far."""
        return bool(self.writers)

    @cached_property
    def samples(self) -> pd.DataFrame:
        if self.given_samples is not None:
            return self.given_samples
        try:
            # A live run's parquet, if any, is an earlier compaction: its records are newer.
            samples = load_samples(self.path, live=self.live)
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise_unless_missing(exc)
            raise RunFolderError(f"cannot read run folder {self.path}: {exc}") from None
        missing = [c for c in COLUMNS if c not in samples.columns]
        if missing:
            raise RunFolderError(f"{self.path}: samples lack columns {missing}: not an evalctl run, or written by an incompatible version")
        return samples

    @cached_property
    def noise(self) -> pd.DataFrame:
        """The A/A replica's records, when the run had the arm (else empty)."""
        if self.given_noise is not None:
            return self.given_noise
        try:
            return load_noise(self.path)
        except (OSError, ValueError) as exc:
            raise_unless_missing(exc)
            raise RunFolderError(f"cannot read the A/A records of {self.path}: {exc}") from None

    def metric(self, requested: Metric | None = None) -> Metric:
        """`requested` when the run's task scores it, else (None) the task's first metric.

        `agreement` (`evalctl.agreement`) is derived, not recorded: asking for it adds its columns
        to the samples and the A/A replica, so every table read after this scores by it."""
        if requested == AGREEMENT and AGREEMENT not in metric_names(self.samples):
            samples = self.samples
            self.samples = with_agreement(samples)
            self.noise = with_agreement(self.noise, samples)
        return primary_metric(self.samples, requested)

    @property
    def chunked_prefill_size(self) -> int | None:
        """The engine's chunked-prefill size, when a server profile sets it (the first one that does)."""
        for profile in self.config.get("servers") or []:
            engine = profile.get("engine") if isinstance(profile, dict) else None
            size = engine.get("chunked_prefill_size") if isinstance(engine, dict) else None
            if isinstance(size, int) and size > 0:
                return size
        return None


def open_run(run_dir: Path) -> Run:
    """A run folder with a readable manifest; its samples are read when first used."""
    if not run_dir.is_dir():
        raise RunFolderError(f"{run_dir} is not a directory")
    return Run(run_dir, read_manifest(run_dir))


def load_run(run_dir: Path) -> Run:
    """A run folder with a readable manifest and samples, read now (a reader's way in)."""
    run = open_run(run_dir)
    run.samples  # noqa: B018 - read now, so an unreadable folder fails before any output
    return run


def raise_unless_missing(exc: Exception) -> None:
    """Re-raise an OSError other than a missing file or folder: a disk failing a read is not bad input (exit 5)."""
    if isinstance(exc, OSError) and exc.errno not in (errno.ENOENT, errno.ENOTDIR):
        raise exc
