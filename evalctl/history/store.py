"""Run history: an in-memory DuckDB query layer over a results root's run folders.

The run folders are the source of truth; nothing here writes to them (a results root
may be a shared filesystem other jobs are writing to). Manifests are small and read
in Python so that one unreadable file only marks its own run; samples are aggregated
by DuckDB straight from every run's `samples.parquet`.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd

from evalctl.analysis.intervals import wilson_interval
from evalctl.analysis.throughput import THROUGHPUT_INPUTS, throughput_table
from evalctl.errors import BadInput
from evalctl.manifest import MANIFEST_FILE, STILL_WRITING, Manifest, ManifestError, parse_manifest
from evalctl.records import CELL_KEYS, SAMPLES_FILE, cell_keys, record_files

METRICS = ("accuracy", "strict", "flexible", "throughput")
RUN_COLUMNS = ["run_id", "status", "model", "created_at", "samples", "cells", "note", "path"]
_PARQUET_MAGIC = b"PAR1"
_RUN_ID = re.compile(r"(?P<stamp>\d{8}-\d{6})-(?P<model>.+)-[0-9a-f]{6}")


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


def inspect_run(path: Path) -> RunListing:
    manifest_path, parquet = path / MANIFEST_FILE, path / SAMPLES_FILE
    manifest: Manifest | None = None
    notes: list[str] = []
    if manifest_path.is_file():
        try:
            manifest = parse_manifest(manifest_path.read_text(), MANIFEST_FILE)
        except (OSError, ManifestError) as exc:
            notes.append(f"unreadable {MANIFEST_FILE}: {exc}")
    has_parquet, has_jsonl = parquet.is_file(), bool(record_files(path))  # the run's records, or its cluster parts
    good_parquet = has_parquet and _looks_like_parquet(parquet)
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
        if not has_parquet and status not in STILL_WRITING:
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
    )


class HistoryStore:
    """Read-only queries over `<root>/*/`: the run list and per-cell trends."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def folders(self) -> list[RunListing]:
        if not self.root.is_dir():
            raise BadInput(f"results root {self.root} is not a directory")
        return [inspect_run(p) for p in sorted(self.root.iterdir()) if p.is_dir()]

    def _query(self, folders: list[RunListing], sql: str, params: list | None = None) -> pd.DataFrame:
        """Run `sql` over a view `samples` of the given runs' parquet files (with a `path` column).

        A file that passes the magic check but still cannot be read would fail the whole
        scan; then each file is tried alone and the bad ones are left out.
        """
        files = [str(f.parquet) for f in folders if f.parquet is not None]
        if not files:
            return pd.DataFrame()
        with duckdb.connect() as con:  # in-memory
            try:
                return self._scan(con, files, sql, params)
            except duckdb.Error:
                readable = [f for f in files if self._readable(con, f)]
                return self._scan(con, readable, sql, params) if readable else pd.DataFrame()

    @staticmethod
    def _scan(con: duckdb.DuckDBPyConnection, files: list[str], sql: str, params: list | None) -> pd.DataFrame:
        rel = con.read_parquet(files, filename=True, union_by_name=True)
        con.register("samples_raw", rel)
        con.execute("CREATE OR REPLACE TEMP VIEW samples AS SELECT * EXCLUDE (filename), parse_dirpath(filename) AS path FROM samples_raw")
        return con.execute(sql, params or []).df()

    @staticmethod
    def _readable(con: duckdb.DuckDBPyConnection, file: str) -> bool:
        try:
            con.execute("SELECT count(*) FROM read_parquet(?)", [file]).fetchall()
            return True
        except duckdb.Error:
            return False

    def runs(self, model: str | None = None, since: dt.date | None = None) -> pd.DataFrame:
        """Every run folder, newest first; broken ones listed with their status and why."""
        folders = [
            f
            for f in self.folders()
            if (model is None or f.model == model) and (since is None or f.created_at is None or f.created_at.date() >= since)
        ]
        counts = self._query(
            folders,
            f"SELECT path, count(*) AS samples, count(DISTINCT ({', '.join(CELL_KEYS)})) AS cells FROM samples GROUP BY path",
        )
        by_path = {row.path: (int(row.samples), int(row.cells)) for row in counts.itertuples()} if len(counts) else {}
        rows = []
        for f in folders:
            samples, cells = by_path.get(str(f.path), (None, None))
            if f.parquet is not None and samples is None and f.status != "corrupt":
                f = RunListing(f.run_id, f.path, "corrupt", f.model, f.created_at, f"{SAMPLES_FILE} unreadable", None)
            rows.append([f.run_id, f.status, f.model, f.created_at, samples, cells, f.note, str(f.path)])
        out = pd.DataFrame(rows, columns=RUN_COLUMNS)
        out["created_at"] = pd.to_datetime(out["created_at"], utc=True)
        return out.sort_values("created_at", ascending=False, na_position="last", kind="stable").reset_index(drop=True)

    def history(
        self,
        model: str,
        metric: str = "accuracy",
        shots: int | None = None,
        cache: str | None = None,
        profile: str | None = None,
        variant: str | None = None,
    ) -> pd.DataFrame:
        """One row per (run, profile, variant, cache, shots) on the first pass, oldest first.

        `accuracy` is strict match (GSM8K's headline figure); `throughput` is output
        tokens per second over the cell's wall-clock window. Only compacted runs with a
        readable manifest count: a run still writing is not yet a point of history.
        """
        if metric not in METRICS:
            raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
        folders = [f for f in self.folders() if f.model == model and f.status != "corrupt"]
        where, params = ["pass_index = 1"], []
        for column, value in (("shots", shots), ("cache", cache), ("profile", profile), ("variant", variant)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        column = "flexible_correct" if metric == "flexible" else "strict_correct"
        table = self._query(
            folders,
            f"""
            SELECT path, profile, variant, cache, shots,
                   count(*) FILTER (WHERE error IS NULL) AS n,
                   count(*) FILTER (WHERE error IS NULL AND {column}) AS hits,
                   count(*) FILTER (WHERE error IS NOT NULL) AS errors
            FROM samples WHERE {" AND ".join(where)}
            GROUP BY ALL
            """,
            params,
        )
        columns = ["run_id", "created_at", "profile", "variant", "cache", "shots", "n", "errors", "value", "lo", "hi"]
        if table.empty:
            return pd.DataFrame(columns=columns)
        meta = {str(f.path): f for f in folders}
        table["run_id"] = [meta[p].run_id for p in table["path"]]
        table["created_at"] = pd.to_datetime([meta[p].created_at for p in table["path"]], utc=True)
        if metric == "throughput":
            # The rows themselves, so throughput has one definition (`analysis.throughput`).
            rows = self._query(folders, f"SELECT path, {', '.join(THROUGHPUT_INPUTS)} FROM samples WHERE {' AND '.join(where)}", params)
            keys = ["path", *cell_keys("pass_index")]
            rates = throughput_table(rows, by=keys)[[*keys, "output_tokens_per_s"]]
            table = table.merge(rates, on=keys, how="left").rename(columns={"output_tokens_per_s": "value"})
            table["lo"] = table["hi"] = float("nan")
        else:
            table["value"] = [h / n if n else float("nan") for h, n in zip(table["hits"], table["n"])]
            bounds = [wilson_interval(int(h), int(n)) for h, n in zip(table["hits"], table["n"])]
            table["lo"], table["hi"] = [b[0] for b in bounds], [b[1] for b in bounds]
        table[["n", "errors"]] = table[["n", "errors"]].astype(int)
        return table.sort_values(["created_at", "run_id", "profile", "variant", "cache", "shots"])[columns].reset_index(drop=True)
