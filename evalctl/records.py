"""The sample record: one row per request, defined once, and its durable store.

Rows are appended to `records.jsonl` as requests complete (written through to the OS at once, fsynced at most
`SYNC_INTERVAL_S` apart: a killed process loses only the requests in flight, a machine crash also at most that
interval's rows); `samples.parquet` is the compacted form every analysis reads, written at the end. Parts of a run
(cluster jobs) each append to their own `records-<part>.jsonl`; every reader here reads them all.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Literal, get_args

import pandas as pd

from evalctl.cell import CellKey
from evalctl.client import RETRYABLE_ERROR_KINDS, ErrorKind, FailedAttempt, TokenLogprob
from evalctl.errors import BadInput
from evalctl.fsio import atomic_path, disk_error

RECORDS_FILE = "records.jsonl"
PART_RECORDS_GLOB = "records-*.jsonl"
SAMPLES_FILE = "samples.parquet"
# The A/A arm's second run of each server's reference cell, kept apart so no other analysis pairs it by mistake;
# one file per profile and variant (`noise_file`), so cluster jobs never share one.
NOISE_GLOB = "noise-*.jsonl"
# Columns newer than some run folders: read as empty from those.
LATER_COLUMNS = ("itl_s", "conversation", "turn", "turn_kind", "source_doc_id", "first_error_kind", "failed_attempts", "logprobs")

# A task's metric, as the task names it (`tasks.lmeval`): GSM8K's `strict` and `flexible`, or a task YAML's filter
# name; each is two columns, `<metric>_answer` and `<metric>_correct`, in the task's order, primary first.
Metric = str
ANSWER_SUFFIX, CORRECT_SUFFIX = "_answer", "_correct"
NO_METRIC = "accuracy"  # what a run without a single record names its (empty) accuracy

# Columns that identify a cell (`CellKey`'s fields), for the many tables grouped or merged by cell.
CELL_KEYS = CellKey.columns()

# Columns that identify one request: at most one row per key survives compaction.
RECORD_KEYS = [*CELL_KEYS, "doc_id", "prompt_hash"]
# prefix-recall: the third of the record list that holds the asked value, in prompt order.
AnswerPosition = Literal["start", "middle", "end"]
# conversation workloads (`tasks.conversation`): how a request got to its transcript.
TurnKind = Literal["first", "extend", "rewind", "branch"]
# A conversation's requests that only extend what the request before them cached (the rest go back: returns).
EXTENDING: tuple[TurnKind, ...] = ("first", "extend")
ANSWER_POSITIONS: tuple[str, ...] = get_args(AnswerPosition)


@dataclass(frozen=True)
class SampleRecord:
    run_id: str
    profile: str
    variant: str
    cache: str  # "on" | "off"
    shots: int
    concurrency: int  # the cell's level: requests in flight
    pass_index: int  # 1-based; pass 2 re-runs the cell without a flush
    doc_id: int
    prompt_hash: str
    question: str  # the scored question alone, not the few-shot prefix
    target: str  # the reference answer as the task extracts it
    prewarmed: bool
    prompt_chars: int
    prompt_tokens: int | None
    cached_tokens: int | None
    completion_tokens: int | None
    started_at: float  # unix seconds
    latency_s: float | None
    ttft_s: float | None  # streamed requests: time to the first text chunk
    itl_s: float | None  # streamed requests: mean inter-token (inter-chunk) latency
    finish_reason: str | None
    response: str | None
    answers: dict[str, str | None]  # per metric: the extracted answer (None: none, or no response)
    correct: dict[str, bool | None]  # per metric: right or wrong (None: no response to score)
    attempts: int
    error: str | None  # None for a scored answer; else why there is none
    error_kind: ErrorKind | None
    # prefix-recall only (None otherwise): where in the prompt the asked value sits
    answer_position: AnswerPosition | None = None
    answer_token_offset: int | None = None  # tokens before the value (server's /tokenize; else estimated)
    # conversation workloads only (None otherwise): `tasks.conversation`
    conversation: int | None = None
    turn: int | None = None  # turns in the transcript this request sent
    turn_kind: TurnKind | None = None
    source_doc_id: int | None = None  # the task's doc id of the question asked (doc_id numbers the requests)
    # Retries are evidence (docs/reliability.md): the first attempt's failure (None: answered, or never sent) and
    # every attempt without an answer (`client.Completion.failed_attempts`); the answer's figures are the last
    # attempt's. Stored as a list of objects, None for none (parquet: list<struct<error_kind, error, latency_s>>).
    first_error_kind: ErrorKind | None = None
    failed_attempts: tuple[FailedAttempt, ...] = ()
    # Requests that asked for logprobs (the logprob rungs, `analysis.divergence`): each generated token with the
    # server's top alternatives, stored as [{token, logprob, top: [{token, logprob}]}] (None when not asked).
    logprobs: tuple[TokenLogprob, ...] | None = None

    def row(self) -> dict:
        """The record as one flat row: each metric's answer and outcome its own columns."""
        row = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("answers", "correct")}
        row["failed_attempts"] = [asdict(a) for a in self.failed_attempts] or None
        row["logprobs"] = stored_logprobs(self.logprobs)
        for metric in self.correct:
            row[metric + ANSWER_SUFFIX] = self.answers.get(metric)
            row[metric + CORRECT_SUFFIX] = self.correct[metric]
        return row

    @classmethod
    def from_row(cls, row: dict) -> SampleRecord:
        """The record a flat row holds (the inverse of `row`)."""
        metrics = metric_names(row)
        plain = {k: v for k, v in row.items() if k in COLUMNS}
        answers = {m: row.get(m + ANSWER_SUFFIX) for m in metrics}
        # `failed_attempts` as read back: a JSON list, parquet's array of dicts, or None.
        stored = plain.pop("failed_attempts", None)
        attempts = tuple(FailedAttempt(**a) for a in stored) if stored is not None else ()
        plain["logprobs"] = read_logprobs(plain.pop("logprobs", None))
        return cls(**plain, failed_attempts=attempts, answers=answers, correct={m: row[m + CORRECT_SUFFIX] for m in metrics})


def stored_logprobs(tokens: Iterable[TokenLogprob] | None) -> list[dict] | None:
    """Token logprobs as a row stores them: top alternatives a list of pairs, not a dict (parquet needs fixed fields)."""
    if tokens is None:
        return None
    return [{"token": t.token, "logprob": t.logprob, "top": [{"token": k, "logprob": v} for k, v in t.top.items()]} for t in tokens]


def read_logprobs(stored: Iterable[Mapping] | None) -> tuple[TokenLogprob, ...] | None:
    """A row's `logprobs` as read back (a JSON list, parquet's array of dicts, or None/NaN) as typed tokens."""
    if stored is None or isinstance(stored, float):
        return None
    return tuple(TokenLogprob(t["token"], t["logprob"], {a["token"]: a["logprob"] for a in t["top"]}) for t in stored)


# The columns every run has; each metric adds its two (`metric_names`).
COLUMNS = [f.name for f in fields(SampleRecord) if f.name not in ("answers", "correct")]


def metric_names(df: pd.DataFrame | Mapping) -> list[str]:
    """The metrics a run's samples (or one row) are scored by, in the task's order (the primary first)."""
    return [c[: -len(CORRECT_SUFFIX)] for c in df if c.endswith(CORRECT_SUFFIX)]


def primary_metric(df: pd.DataFrame, requested: str | None = None) -> str:
    """`requested` if the samples have it, else (None) the task's first metric; an unknown one is a BadInput.
    Samples without rows hold no metric columns: then `requested`, or NO_METRIC, names the (empty) tables."""
    known = metric_names(df)
    if not known:
        return requested or NO_METRIC
    if requested is None:
        return known[0]
    if requested not in known:
        raise BadInput(f"unknown metric {requested!r}: this run's task scores {', '.join(known) or 'none'}")
    return requested


# A fsync per row costs a few ms of the event loop that sends the requests (4.3 ms a row here: a
# whole-sweep cost of ~6 s in 1,319 GSM8K rows); once per interval bounds what a power loss takes.
SYNC_INTERVAL_S = 0.25


class RecordWriter:
    """Append-only JSONL writer; each record is in the OS's hands before `write` returns, on disk
    within `SYNC_INTERVAL_S`, and all of them once the writer closes."""

    def __init__(self, run_dir: Path, part: str | None = None, file: str | None = None):
        # The run's own file, or its part's: no two writers share a file.
        self.path = run_dir / (file or (RECORDS_FILE if part is None else f"records-{part}.jsonl"))
        try:
            _drop_torn_tail(self.path)
            self._fh = open(self.path, "a", encoding="utf-8")
        except OSError as exc:
            raise disk_error(exc, self.path) from exc
        self._synced = time.monotonic()
        self._writing = threading.Lock()  # launches side by side write from their own threads: whole lines

    def write(self, record: SampleRecord) -> None:
        """Append one line; DiskError naming the file if the disk refuses (earlier lines stay whole)."""
        line = json.dumps(record.row(), ensure_ascii=False) + "\n"
        try:
            with self._writing:
                self._fh.write(line)
                self._fh.flush()
                if time.monotonic() - self._synced >= SYNC_INTERVAL_S:
                    self._sync()
        except OSError as exc:
            raise disk_error(exc, self.path) from exc

    def _sync(self) -> None:
        os.fsync(self._fh.fileno())
        self._synced = time.monotonic()

    def close(self) -> None:
        with contextlib.suppress(OSError):  # a refusal here loses no row a running machine keeps: each was written through
            self._sync()
            self._fh.close()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _drop_torn_tail(path: Path) -> None:
    """Cut a last line left half-written by a crash, so appended records start on a line of their own."""
    if not path.is_file():
        return
    with open(path, "rb+") as fh:
        data = fh.read()
        end = data.rfind(b"\n") + 1
        if end != len(data):
            fh.truncate(end)
            os.fsync(fh.fileno())


def record_files(run_dir: Path) -> list[Path]:
    """Every records file of a run: the run's own first, then one per part."""
    return [p for p in [run_dir / RECORDS_FILE, *sorted(run_dir.glob(PART_RECORDS_GLOB))] if p.is_file()]


def read_records(run_dir: Path) -> pd.DataFrame:
    """All appended rows of a run, from every records file (duplicates kept: see `one_per_request`)."""
    frames = [df for df in map(read_jsonl, record_files(run_dir)) if len(df)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)


def read_jsonl(path: Path) -> pd.DataFrame:
    """Read appended records; a torn last line (crash mid-write) is skipped."""
    rows = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            with contextlib.suppress(json.JSONDecodeError):
                rows.append(json.loads(line))
    # Every base column (empty where missing), base columns first, then the metrics' in order.
    df = pd.DataFrame(rows)
    return df.reindex(columns=[*COLUMNS, *(c for c in df.columns if c not in COLUMNS)])


def load_samples(run_dir: Path, live: bool = False) -> pd.DataFrame:
    """The run's samples: the parquet file when written (and the run is not `live`: being written), else the JSONL."""
    parquet = run_dir / SAMPLES_FILE
    if parquet.is_file() and not (live and record_files(run_dir)):
        df = pd.read_parquet(parquet)
        return df.assign(**{c: None for c in LATER_COLUMNS if c not in df})
    if record_files(run_dir):
        return one_per_request(read_records(run_dir))
    raise FileNotFoundError(f"{run_dir} has no {SAMPLES_FILE} or {RECORDS_FILE}: not a run folder")


def noise_file(profile: str, variant: str) -> str:
    return f"noise-{profile}-{variant}.jsonl"


def load_noise(run_dir: Path) -> pd.DataFrame:
    """The A/A arm's records (one per request), or an empty frame for a run without the arm."""
    frames = [df for df in map(read_jsonl, sorted(run_dir.glob(NOISE_GLOB))) if len(df)]
    return one_per_request(pd.concat(frames, ignore_index=True)) if frames else pd.DataFrame(columns=COLUMNS)


def is_final(df: pd.DataFrame) -> pd.Series:
    """Rows that settle their request: an answer or an error that retrying would not change."""
    return ~df.error_kind.isin(RETRYABLE_ERROR_KINDS)


def one_per_request(df: pd.DataFrame) -> pd.DataFrame:
    """One row per request key: the last final row, else the last retryable error (row order kept)."""
    if df.empty:
        return df
    ranked = df.assign(_final=is_final(df).astype(int), _order=range(len(df)))
    kept = ranked.sort_values(["_final", "_order"], kind="stable").drop_duplicates(RECORD_KEYS, keep="last")
    return kept.sort_values("_order").drop(columns=["_final", "_order"]).reset_index(drop=True)


def compact(run_dir: Path) -> pd.DataFrame:
    """Write `samples.parquet` from every records file (atomically, one row per request) and return the frame."""
    df = one_per_request(read_records(run_dir))
    with atomic_path(run_dir / SAMPLES_FILE) as tmp:
        df.to_parquet(tmp, index=False)
    return df
