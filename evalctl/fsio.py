"""Writing files so that neither a reader nor a crash ever sees half of one (`atomic_path`, for every file written
whole; append-only records: `records.RecordWriter`), and a write the disk refuses as a `DiskError` naming the file.
"""

from __future__ import annotations

import errno
import hashlib
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evalctl.errors import DiskError

# The disk said no; anything else (EIO, ENOENT of a folder removed under us) stays an OSError.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES})


def disk_error(exc: OSError, path: Path | str) -> OSError:
    """`exc` as a DiskError naming `path` when the disk refused the write; else `exc` itself."""
    if isinstance(exc, DiskError) or exc.errno not in DISK_ERRNOS:
        return exc
    return DiskError(exc.errno, exc.strerror or os.strerror(exc.errno), str(path))


def fsync_dir(folder: Path) -> None:
    """Make a rename or a new file in `folder` durable (the directory entry, not only the data)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def atomic_path(path: Path | str) -> Iterator[Path]:
    """A temporary path to write `path`'s new content to (by any writer: pandas, matplotlib, a copy); on leaving the
    block it replaces `path` atomically and durably. On any error the temporary file is removed and `path` is left as
    it was; a disk refusal is raised as DiskError naming `path`.

    The temporary is hidden in the target's own folder (a rename inside one directory is atomic, on NFS too), named
    by PID and a random suffix, fsynced, renamed over the target; then the folder is fsynced (survives a power cut)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        yield tmp
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        named = disk_error(exc, path) if isinstance(exc, OSError) else exc
        if named is exc:
            raise
        raise named from exc


def write_atomic(path: Path | str, data: str | bytes) -> Path:
    """Write `data` (text is UTF-8) to `path` atomically and durably (see `atomic_path`); the path."""
    path = Path(path)
    with atomic_path(path) as tmp:
        tmp.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def file_sha256(path: Path | str, digest: Any = None) -> str:
    """Hex sha256 of the file at `path`, read in 1 MiB chunks; a running `digest` passed in is fed the bytes instead."""
    digest = hashlib.sha256() if digest is None else digest
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
