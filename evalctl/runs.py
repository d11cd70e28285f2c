"""The run-folder readers: `open_run`/`load_run`, one run as analysis, gate, reports and resume see it, or one clear
error; `inspect_run`, any folder under a results root as history and the dashboard list it, trusting none of it.

A run folder another process is writing (`runlock.writers`) is read as a snapshot: the manifest and samples.parquet
are only ever replaced whole (`fsio`), and a live run's samples are its records files' rows so far.
"""

from __future__ import annotations

import datetime as dt
import errno
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from evalctl.agreement import AGREEMENT, with_agreement
from evalctl.errors import BadInput, ManifestError
from evalctl.manifest import MANIFEST_FILE, STILL_WRITING, Manifest, read_manifest
from evalctl.records import COLUMNS, SAMPLES_FILE, Metric, load_noise, load_samples, metric_names, primary_metric, record_files
from evalctl.runlock import Holder, writers

_PARQUET_MAGIC = b"PAR1"
FOLLOW_UP_DIR = "follow-up"
_RUN_ID = re.compile(r"(?P<stamp>\d{8}-\d{6})-(?P<model>.+)-[0-9a-f]{6}")


@dataclass(eq=False)
class Run:
    """A run folder: its manifest and its samples (given, or read from the folder on first use)."""

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
        # A live run's parquet, if any, is an earlier compaction: its records are newer.
        samples = self._read(lambda: load_samples(self.path, live=self.live), f"run folder {self.path}")
        missing = [c for c in COLUMNS if c not in samples.columns]
        if missing:
            raise BadInput(f"{self.path}: samples lack columns {missing}: not an evalctl run, or written by an incompatible version")
        return samples

    @cached_property
    def noise(self) -> pd.DataFrame:
        """The A/A replica's records, when the run had the arm (else empty)."""
        if self.given_noise is not None:
            return self.given_noise
        return self._read(lambda: load_noise(self.path), f"the A/A records of {self.path}")

    @staticmethod
    def _read(load: Callable[[], pd.DataFrame], what: str) -> pd.DataFrame:
        """`load()`, a folder's files missing or unreadable as BadInput; a disk failing a read is no bad input (exit 5)."""
        try:
            return load()
        except (OSError, ValueError, pa.ArrowException) as exc:
            if isinstance(exc, OSError) and exc.errno not in (errno.ENOENT, errno.ENOTDIR):
                raise
            raise BadInput(f"cannot read {what}: {exc}") from None

    def metric(self, requested: Metric | None = None) -> Metric:
        """`requested` when the run's task scores it, else (None) the task's first metric. `agreement` is derived, not
        recorded: asking for it adds its columns to the samples and the A/A replica, for every later table."""
        if requested == AGREEMENT and AGREEMENT not in metric_names(self.samples):
            samples = self.samples
            self.samples = with_agreement(samples)
            self.noise = with_agreement(self.noise, samples)
        return primary_metric(self.samples, requested)

    @cached_property
    def follow_up(self) -> Run | None:
        """The follow-up of a hunt's leads, which `evalctl sweep` writes into the hunt's folder (`follow-up/`): the newest
        run there; None when there is none."""
        found = sorted((self.path / FOLLOW_UP_DIR).glob(f"*/{MANIFEST_FILE}"))
        return load_run(found[-1].parent) if found else None

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
        raise BadInput(f"{run_dir} is not a directory")
    return Run(run_dir, read_manifest(run_dir))


def load_run(run_dir: Path) -> Run:
    """A run folder with a readable manifest and samples, read now: an unreadable folder fails before any output."""
    run = open_run(run_dir)
    run.samples  # noqa: B018
    return run


@dataclass(frozen=True)
class RunListing:
    """What a run folder holds, judged without trusting any of it."""

    run_id: str
    path: Path
    status: str  # the manifest's (running|complete|failed|interrupted), or partial|corrupt|empty
    model: str | None
    created_at: dt.datetime | None
    note: str
    parquet: Path | None  # readable-looking samples.parquet, for the sample queries
    manifest: Manifest | None = field(default=None, compare=False)  # None when missing or unreadable


def _parse_time(value: object) -> dt.datetime | None:
    try:
        stamp = dt.datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.timezone.utc)


def _looks_like_parquet(path: Path) -> bool:
    """Header and footer magic: cheap, and catches the torn or truncated file."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
            fh.seek(-4, 2)
            return head == _PARQUET_MAGIC and fh.read(4) == _PARQUET_MAGIC
    except OSError:
        return False


def _from_name(name: str) -> tuple[str | None, dt.datetime | None]:
    """Model and creation time from a run id (`new_run_id`), for folders whose manifest is lost."""
    match = _RUN_ID.fullmatch(name)
    if not match:
        return None, None
    return match["model"], dt.datetime.strptime(match["stamp"], "%Y%m%d-%H%M%S").replace(tzinfo=dt.timezone.utc)


def _manifest(run_dir: Path) -> tuple[Manifest | None, str | None]:
    """The manifest, or None and why it is unreadable (None, None: there is none)."""
    if not (run_dir / MANIFEST_FILE).is_file():
        return None, None
    try:
        return read_manifest(run_dir), None
    except (OSError, ManifestError) as exc:
        return None, f"unreadable {MANIFEST_FILE}: {exc}"


def inspect_run(path: Path) -> RunListing:
    """What the folder holds now, even while a sweep writes it.

    A writer makes the manifest, then records, then `samples.parquet`, and saves its final status before it lets go
    of the lock. Read in the reverse order, a folder caught mid-write is seen in a state it really passed through,
    never as corrupt (records seen, manifest not yet) or interrupted (a `running` manifest read just before the end).
    """
    manifest_path, parquet = path / MANIFEST_FILE, path / SAMPLES_FILE
    has_parquet, has_jsonl = parquet.is_file(), bool(record_files(path))  # the run's records, or its cluster parts
    good_parquet = has_parquet and _looks_like_parquet(parquet)
    manifest, unreadable = _manifest(path)
    holders = writers(path)
    if manifest is not None and manifest.status == "running" and not holders:
        manifest, unreadable = _manifest(path)  # did it finish before letting go?
    notes = [unreadable] if unreadable else []
    if has_parquet and not good_parquet:
        notes.append(f"{SAMPLES_FILE} is truncated or not parquet")

    if manifest is None and not (has_parquet or has_jsonl or notes):
        status = "empty"
        notes.append("no manifest, no samples")
    elif manifest is None or (has_parquet and not good_parquet):
        status = "corrupt"
        if not manifest_path.is_file():
            notes.append(f"no {MANIFEST_FILE}")
    else:
        status = manifest.status
        if holders:  # the lock says so, whatever the manifest last said (a resume, a part of a cluster run)
            status = "running"
            notes.append("written by " + "; ".join(h.describe() for h in holders))
        elif status == "running":
            status = "interrupted"  # its writer died without a word (kill -9, power): nobody holds the lock
            notes.append("its writer is gone: finish with evalctl sweep --resume")
        elif not has_parquet and status not in STILL_WRITING:
            status = "partial"
            notes.append("records only, not compacted" if has_jsonl else "no samples")
    name_model, name_time = _from_name(path.name)
    return RunListing(
        run_id=manifest.run_id if manifest else path.name,
        path=path,
        status=status,
        model=(manifest.model if manifest else None) or name_model,
        created_at=(_parse_time(manifest.created_at) if manifest else None) or name_time,
        note="; ".join(notes),
        parquet=parquet if good_parquet else None,
        manifest=manifest,
    )
