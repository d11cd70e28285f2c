"""The one atomic-write helper: a reader sees the old file or the new one, and a refused write names its file."""

from __future__ import annotations

import errno

import pytest

from evalctl.errors import DiskError
from evalctl.fsio import atomic_path, disk_error, write_atomic


def test_write_atomic_replaces_the_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "manifest.json"
    target.write_text("old")
    write_atomic(target, '{"new": true}')
    assert target.read_text() == '{"new": true}'
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]


def test_a_failed_write_leaves_the_old_file_whole_and_no_temporary(tmp_path):
    target = tmp_path / "samples.parquet"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("writer died")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["samples.parquet"]


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES])
def test_disk_refusals_become_disk_errors_naming_the_file(code, tmp_path):
    exc = disk_error(OSError(code, "refused"), tmp_path / "records.jsonl")
    assert isinstance(exc, DiskError) and exc.exit_status == 5 and exc.errno == code
    assert str(exc) == f"cannot write {tmp_path / 'records.jsonl'}: refused"


def test_other_os_errors_stay_as_they_are(tmp_path):
    original = OSError(errno.EIO, "i/o error")
    assert disk_error(original, tmp_path / "x") is original


def test_a_vanished_folder_stays_a_plain_os_error(tmp_path):
    missing = tmp_path / "gone" / "gate.json"
    with pytest.raises(FileNotFoundError):
        write_atomic(missing, "x")
