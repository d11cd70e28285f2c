"""The history store over run folders: listing (broken folders included), trends, read-only, concurrent writers."""

from __future__ import annotations

import datetime as dt
import json
import multiprocessing
from pathlib import Path

import pandas as pd
import pytest
from run_folders import cell_rows, make_run

from evalctl import runs as runs_module
from evalctl.history.store import HistoryStore
from evalctl.manifest import Manifest, new_run_id, write_manifest
from evalctl.records import RecordWriter, SampleRecord, compact
from evalctl.runlock import RunLock

DAY = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)


def test_slurm_run_whose_parts_are_still_writing_is_listed_as_submitted(tmp_path):
    run = make_run(tmp_path, "m", DAY, cell_rows([True]), status="submitted")
    (run / "samples.parquet").rename(run / "records-cpu-default.jsonl")  # a part job's records; aggregation compacts later
    (row,) = HistoryStore(tmp_path).runs().to_dict("records")
    assert (row["status"], row["note"]) == ("submitted", "")
    (run / "records-cpu-default.jsonl").unlink()  # submitted, no part has started: still not broken
    (row,) = HistoryStore(tmp_path).runs().to_dict("records")
    assert row["status"] == "submitted"


def test_runs_lists_good_and_broken_folders_without_failing(tmp_path):
    good = make_run(tmp_path, "m", DAY, cell_rows([True, False]))
    partial = make_run(tmp_path, "m", DAY + dt.timedelta(days=1), cell_rows([True]))
    (partial / "samples.parquet").rename(partial / "records.jsonl")  # crashed before compaction
    bad_manifest = make_run(tmp_path, "m", DAY, cell_rows([True]))
    (bad_manifest / "manifest.json").write_text("{not json")
    torn = make_run(tmp_path, "m", DAY, cell_rows([True]))
    data = (torn / "samples.parquet").read_bytes()
    (torn / "samples.parquet").write_bytes(data[: len(data) // 2])
    garbled = make_run(tmp_path, "m", DAY, cell_rows([True]))
    (garbled / "samples.parquet").write_bytes(b"PAR1" + b"\0" * 64 + b"PAR1")  # passes the magic check, fails to read
    (tmp_path / "empty-folder").mkdir()
    (tmp_path / "stray-file.txt").write_text("not a run")

    runs = HistoryStore(tmp_path).runs().set_index("path")
    assert len(runs) == 6
    assert runs.loc[str(good), "status"] == "complete"
    assert runs.loc[str(good), "samples"] == 2 and runs.loc[str(good), "cells"] == 1
    assert runs.loc[str(partial), "status"] == "partial" and "records only" in runs.loc[str(partial), "note"]
    assert runs.loc[str(bad_manifest), "status"] == "corrupt" and "unreadable manifest.json" in runs.loc[str(bad_manifest), "note"]
    # the model of a folder with a lost manifest comes from its run id
    assert runs.loc[str(bad_manifest), "model"] == "m"
    assert runs.loc[str(torn), "status"] == "corrupt" and "truncated" in runs.loc[str(torn), "note"]
    assert runs.loc[str(garbled), "status"] == "corrupt" and "unreadable" in runs.loc[str(garbled), "note"]
    assert runs.loc[str(tmp_path / "empty-folder"), "status"] == "empty"
    # the good run's samples still count though another parquet in the scan is garbage
    assert HistoryStore(tmp_path).history("m", "accuracy")["n"].sum() == 2


def test_runs_filters_by_model_and_date_newest_first(tmp_path):
    older = make_run(tmp_path, "a", DAY, cell_rows([True]))
    newer = make_run(tmp_path, "a", DAY + dt.timedelta(days=5), cell_rows([True]))
    make_run(tmp_path, "b", DAY + dt.timedelta(days=9), cell_rows([True]))
    store = HistoryStore(tmp_path)
    assert list(store.runs(model="a")["path"]) == [str(newer), str(older)]
    assert list(store.runs()["model"]) == ["b", "a", "a"]
    since = store.runs(model="a", since=(DAY + dt.timedelta(days=2)).date())
    assert list(since["path"]) == [str(newer)]


def test_history_gives_metric_per_run_at_one_cell_oldest_first(tmp_path):
    first = make_run(tmp_path, "m", DAY, cell_rows([True] * 9 + [False], shots=8) + cell_rows([True] * 10, shots=2))
    second = make_run(tmp_path, "m", DAY + dt.timedelta(days=1), cell_rows([True] * 2 + [False] * 8, shots=8, cache="on"))
    make_run(tmp_path, "other", DAY, cell_rows([False] * 10, shots=8))
    trend = HistoryStore(tmp_path).history("m", "accuracy", shots=8, cache="on")
    assert list(trend["run_id"]) == [first.name, second.name]
    assert list(trend["value"]) == pytest.approx([0.9, 0.2])
    assert (trend["lo"] < trend["value"]).all() and (trend["hi"] > trend["value"]).all()
    assert list(trend["n"]) == [10, 10]


def test_history_throughput_and_errors_apart(tmp_path):
    rows = cell_rows([True, True], completion_tokens=10, latency_s=1.0)
    rows.append({"doc_id": 9, "error": "timeout", "error_kind": "timeout", "strict_correct": None, "started_at": 0.0, "latency_s": 1.0})
    make_run(tmp_path, "m", DAY, rows)
    acc = HistoryStore(tmp_path).history("m", "accuracy")
    assert acc.loc[0, "n"] == 2 and acc.loc[0, "errors"] == 1 and acc.loc[0, "value"] == 1.0
    tp = HistoryStore(tmp_path).history("m", "throughput")
    # rows start at 0 and 1 s, each takes 1 s: 20 output tokens over a 2 s window
    assert tp.loc[0, "value"] == pytest.approx(10.0)
    with pytest.raises(ValueError, match="metric must be one of"):
        HistoryStore(tmp_path).history("m", "bogus")


def test_store_writes_nothing_into_run_folders(tmp_path):
    for day in range(3):
        make_run(tmp_path, "m", DAY + dt.timedelta(days=day), cell_rows([True, False]))

    def snapshot():
        return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in tmp_path.rglob("*")}

    before = snapshot()
    store = HistoryStore(tmp_path)
    store.runs()
    store.history("m", "accuracy")
    assert snapshot() == before


def _record(run_id: str, i: int) -> SampleRecord:
    return SampleRecord(run_id, "cpu", "default", "on", 8, 4, 1, i, f"h{i}", "q", "1", False, 10, 100, 0, 5, 0.0, 1.0, None, None,
                        "stop", "#### 1", {"strict": "1", "flexible": "1"}, {"strict": True, "flexible": True}, 1, None, None)  # fmt: skip


def _write_run(root: str, model: str, rows: int, barrier) -> str:
    """What a sweep does to the results root: a unique folder, manifest by rename, records, compaction."""
    barrier.wait()  # every writer starts at once
    run_id = new_run_id(model)
    run = Path(root) / run_id
    run.mkdir()  # exist_ok=False: a clash fails loudly rather than sharing a folder
    lock = RunLock(run).acquire("sweep")
    manifest = Manifest(run_id=run_id, created_at=dt.datetime.now(dt.timezone.utc).isoformat(), config={"model": model})
    write_manifest(run, manifest)
    with RecordWriter(run) as writer:
        for i in range(rows):
            writer.write(_record(run_id, i))
            write_manifest(run, manifest)  # rewritten while others read, as a sweep does
    manifest.status = "complete"
    write_manifest(run, manifest)
    compact(run)
    lock.release()
    return run_id


def _new_locked_run(root: Path) -> tuple[Path, Manifest, RunLock]:
    run_id = new_run_id("m")
    (root / run_id).mkdir()
    lock = RunLock(root / run_id).acquire("sweep")
    return root / run_id, Manifest(run_id=run_id, created_at=DAY.isoformat(), config={"model": "m"}), lock


def test_a_run_whose_manifest_and_records_appear_while_it_is_read_is_running_not_corrupt(tmp_path, monkeypatch):
    run, manifest, lock = _new_locked_run(tmp_path)
    real = runs_module.record_files

    def writer_starts_meanwhile(path):  # the sweep writes its manifest, then its first record, as the reader looks
        write_manifest(run, manifest)
        with RecordWriter(run) as writer:
            writer.write(_record(manifest.run_id, 0))
        return real(path)

    monkeypatch.setattr(runs_module, "record_files", writer_starts_meanwhile)
    listing = runs_module.inspect_run(run)
    assert (listing.status, listing.manifest) == ("running", manifest), listing.note
    lock.release()


def test_a_run_that_finishes_while_it_is_read_is_not_taken_for_interrupted(tmp_path, monkeypatch):
    run, manifest, lock = _new_locked_run(tmp_path)
    write_manifest(run, manifest)
    with RecordWriter(run) as writer:
        writer.write(_record(manifest.run_id, 0))
    real = runs_module.writers

    def writer_finishes_meanwhile(path):  # the manifest said running; the sweep saves complete and lets go
        manifest.status = "complete"
        write_manifest(run, manifest)
        lock.release()
        return real(path)

    monkeypatch.setattr(runs_module, "writers", writer_finishes_meanwhile)
    listing = runs_module.inspect_run(run)
    # complete but not yet seen compacted: partial, a state it passed through (interrupted it never was)
    assert listing.status == "partial" and listing.manifest.status == "complete", listing.note


def test_concurrent_writers_all_end_listed_and_readable(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    n, rows = 6, 20
    barrier = ctx.Manager().Barrier(n)
    with ctx.Pool(n) as pool:
        pending = pool.starmap_async(_write_run, [(str(tmp_path), "m", rows, barrier)] * n)
        store = HistoryStore(tmp_path)
        while not pending.ready():
            # a reader mid-write sees each run in one of its transient states, never a corrupt one:
            # empty (just created), running, partial (complete, not yet compacted), complete
            assert set(store.runs()["status"]) <= {"empty", "running", "partial", "complete"}
        run_ids = pending.get(timeout=120)
    assert len(set(run_ids)) == n
    runs = HistoryStore(tmp_path).runs()
    assert sorted(runs["run_id"]) == sorted(run_ids)
    assert (runs["status"] == "complete").all() and (runs["samples"] == rows).all()
    for run_id in run_ids:
        assert json.loads((tmp_path / run_id / "manifest.json").read_text())["run_id"] == run_id
        assert len(pd.read_parquet(tmp_path / run_id / "samples.parquet")) == rows
    assert not list(tmp_path.glob("*/*.tmp"))
