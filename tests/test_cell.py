"""`CellKey`: the one name of a cell; values read back from tables cast once, to compare like with like."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from evalctl.cell import CellKey, cell_label
from evalctl.records import CELL_KEYS, RECORD_KEYS
from evalctl.schema import CacheMode

CELL = CellKey("cpu", "default", CacheMode.on, 16, 4, 1)
ROW = {"profile": "cpu", "variant": "default", "cache": "on", "shots": np.int64(16), "concurrency": np.int64(4), "pass_index": np.int64(1)}


def test_the_columns_are_the_fields_in_order_and_a_partial_key_leaves_some_out():
    assert CELL_KEYS == CellKey.columns() == ["profile", "variant", "cache", "shots", "concurrency", "pass_index"]
    assert RECORD_KEYS[:6] == CELL_KEYS
    assert CellKey.columns("cache") == ["profile", "variant", "shots", "concurrency", "pass_index"]
    assert CellKey.columns("shots", "pass_index") == ["profile", "variant", "cache", "concurrency"]
    with pytest.raises(ValueError, match="not a cell key: pass"):
        CellKey.columns("pass")


def test_a_row_a_series_and_a_record_name_the_same_cell():
    assert CellKey.from_row(ROW) == CellKey.from_row(pd.Series(ROW)) == CELL
    assert type(CellKey.from_row(ROW).shots) is int and CellKey.from_row(ROW).cache is CacheMode.on

    class Record:
        profile, variant, cache, shots, concurrency, pass_index = "cpu", "default", "on", 16, 4, 1

    assert CellKey.from_record(Record()) == CELL and hash(CellKey.from_record(Record())) == hash(CELL)


def test_as_dict_is_the_records_columns_and_the_label_is_for_people():
    assert CELL.as_dict() == {"profile": "cpu", "variant": "default", "cache": "on", "shots": 16, "concurrency": 4, "pass_index": 1}
    assert CellKey.from_row(CELL.as_dict()) == CELL
    assert CELL.label == "cpu/default cache=on shots=16 conc=4 pass=1"
    assert cell_label(profile="cpu", variant="default", shots=8) == "cpu/default shots=8"


def test_a_frames_cells_and_its_groups_by_cell_are_in_order():
    frame = pd.DataFrame([{**ROW, "shots": 16, "doc_id": 0}, {**ROW, "shots": 8, "doc_id": 0}, {**ROW, "shots": 16, "doc_id": 1}])
    assert CellKey.in_frame(frame) == [CELL, CellKey("cpu", "default", CacheMode.on, 8, 4, 1)]
    groups = list(CellKey.groups(frame))
    assert [cell for cell, _ in groups] == sorted(CellKey.in_frame(frame)) and [len(g) for _, g in groups] == [1, 2]
