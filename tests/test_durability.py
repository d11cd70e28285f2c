"""The record store survives crashes: torn lines, retried requests, duplicate keys."""

from __future__ import annotations

import json
from dataclasses import replace

import pandas as pd

from evalctl.records import RECORD_KEYS, RECORDS_FILE, SAMPLES_FILE, RecordWriter, SampleRecord, compact, load_samples, read_jsonl


def record(doc_id: int, *, error_kind: str | None = None, shots: int = 1, response: str = "#### 1") -> SampleRecord:
    return SampleRecord(
        run_id="r", profile="cpu", variant="default", cache="on", shots=shots, concurrency=4, pass_index=1, doc_id=doc_id,
        prompt_hash=f"h{doc_id}",
        question="q", target="1", prewarmed=False, prompt_chars=10, prompt_tokens=5, cached_tokens=0, completion_tokens=3,
        started_at=0.0, latency_s=0.1, ttft_s=None, itl_s=None, finish_reason="stop", response=None if error_kind else response,
        answers={"strict": None, "flexible": None},
        correct=dict.fromkeys(("strict", "flexible"), None if error_kind else True), attempts=1, error=error_kind, error_kind=error_kind,
    )  # fmt: skip


def test_a_torn_last_line_is_cut_before_appending(tmp_path):
    with RecordWriter(tmp_path) as writer:
        writer.write(record(0))
    with open(tmp_path / RECORDS_FILE, "a") as fh:
        fh.write('{"run_id": "r", "prof')  # kill -9 in the middle of a write
    assert len(read_jsonl(tmp_path / RECORDS_FILE)) == 1
    with RecordWriter(tmp_path) as writer:
        writer.write(record(1))
    lines = (tmp_path / RECORDS_FILE).read_text().splitlines()
    assert [json.loads(line)["doc_id"] for line in lines] == [0, 1]


def test_compaction_keeps_one_row_per_request_preferring_final_rows(tmp_path):
    with RecordWriter(tmp_path) as writer:
        writer.write(record(0, error_kind="connection"))  # server died; re-sent after restart
        writer.write(record(1))
        writer.write(record(0))  # the retry's answer
        writer.write(record(2, error_kind="http_4xx"))  # final: not re-sent
        writer.write(record(3))
        writer.write(record(3, error_kind="server_died"))  # a stray later error must not hide the answer
        writer.write(record(4, error_kind="timeout"))
        writer.write(replace(record(4, error_kind="server_died"), error="server died"))
    df = compact(tmp_path)
    assert not df.duplicated(RECORD_KEYS).any()
    kinds = {doc: kind if isinstance(kind, str) else None for doc, kind in zip(df.doc_id, df.error_kind)}
    assert kinds == {0: None, 1: None, 2: "http_4xx", 3: None, 4: "server_died"}
    assert pd.read_parquet(tmp_path / SAMPLES_FILE).equals(df)
    (tmp_path / SAMPLES_FILE).unlink()
    assert load_samples(tmp_path).equals(df)  # the live JSONL reads the same


def test_same_doc_in_other_cells_is_not_a_duplicate(tmp_path):
    with RecordWriter(tmp_path) as writer:
        writer.write(record(0, shots=1))
        writer.write(record(0, shots=2))
    assert len(compact(tmp_path)) == 2


def test_parts_records_files_are_read_together(tmp_path):
    """Cluster jobs append to their own files; compaction, loading and resume see every one."""
    from evalctl.manifest import Manifest
    from evalctl.resume import finished_keys
    from evalctl.runs import Run

    with RecordWriter(tmp_path, part="a-default") as writer:
        writer.write(record(0))
        writer.write(record(1, error_kind="server_died"))
    with RecordWriter(tmp_path, part="b-default") as writer:
        writer.write(replace(record(0), profile="b"))
    with RecordWriter(tmp_path) as writer:  # a later local resume of the same run
        writer.write(record(1))
    assert not (tmp_path / SAMPLES_FILE).exists()
    live = load_samples(tmp_path)
    assert len(live) == 3 and live.error.isna().all()
    assert len(compact(tmp_path)) == 3
    assert {(k.cell.profile, k.doc_id) for k in finished_keys(Run(tmp_path, Manifest(run_id="r")))} == {("cpu", 0), ("cpu", 1), ("b", 0)}
