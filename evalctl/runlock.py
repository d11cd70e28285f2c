"""One writer per run folder: the lock a writing process holds, and how readers see who is writing
(docs/run-folders.md: who locks what, and which shared filesystems the lock holds on).

`fcntl.flock` on `<run>/.writer.lock`, exclusive while the process writes the run; the OS releases it when the
process dies (kill -9 included). A second writer gets a `BadInput` naming the holder, or waits (`--wait-for-lock`).
Slurm parts hold the run lock *shared* and their own `jobs/<part>.lock` exclusively; only exclusive holders write
the manifest. The holder writes who it is into its lock file, believed only while the lock is held. Readers only
probe (non-blocking, shared, read-only: `writers`); a writer that meets a probe retries for `GRACE_S`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shlex
import socket
import sys
import time
from pathlib import Path

from pydantic import BaseModel, ValidationError

from evalctl.errors import BadInput
from evalctl.fsio import disk_error
from evalctl.manifest import PARTS_DIR, now
from evalctl.secrets import redact_argv

LOCK_FILE = ".writer.lock"
PART_LOCK_SUFFIX = ".lock"
# A reader's probe holds a lock for microseconds: a writer retries this long before refusing.
GRACE_S = 1.0
_POLL_S = 0.1


class Holder(BaseModel):
    """Who holds a lock: written into the lock file by its holder."""

    role: str  # sweep | resume | submit | aggregate | part <name>
    host: str
    pid: int
    command: str
    since: str

    def describe(self) -> str:
        return f"{self.role} (PID {self.pid} on {self.host}, since {self.since}): {self.command}"


def _command() -> str:
    if not sys.argv:
        return "?"
    name = Path(sys.argv[0]).name
    return shlex.join(redact_argv(["evalctl" if name == "__main__.py" else name, *sys.argv[1:]]))  # `python -m evalctl.cli`


class FolderLock:
    """A flock on one file, held by this process until `release` (or its death)."""

    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None

    def acquire(self, role: str, *, shared: bool = False, wait_s: float = 0.0) -> bool:
        """Take the lock (waiting up to `wait_s`, at least `GRACE_S`); False if another process holds it still."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise disk_error(exc, self.path) from exc
        deadline = time.monotonic() + max(wait_s, GRACE_S)
        while True:
            try:
                fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    return False
                time.sleep(_POLL_S)
        self._fd = fd
        if shared:  # shared holders (parts) say who they are in their own part lock
            return True
        holder = Holder(role=role, host=socket.gethostname(), pid=os.getpid(), command=_command(), since=now())
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, holder.model_dump_json().encode(), 0)
        except OSError as exc:  # a full disk still lets the lock work; only the message loses its name
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise disk_error(exc, self.path) from exc
        return True

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)  # no stale name for a reader to show
        os.close(self._fd)  # closing the last descriptor releases the flock
        self._fd = None


def holder_of(path: Path) -> Holder | None:
    """The holder of the lock file at `path` now, or None when nobody holds it (a shared holder says no name)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None  # no lock file: nobody ever locked it (a run folder from before locks)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # got it: nobody holds the lock (closing the file releases it)
    except BlockingIOError:
        try:
            return Holder.model_validate_json(os.pread(fd, 4096, 0))
        except ValidationError:  # taken a moment ago, name not yet written
            return Holder(role="writer", host="?", pid=0, command="?", since="?")
    finally:
        os.close(fd)
    return None


def run_lock_path(run_dir: Path) -> Path:
    return run_dir / LOCK_FILE


def writers(run_dir: Path) -> list[Holder]:
    """Who is writing the run folder now: its exclusive writer, or the Slurm parts running in it; empty if nobody."""
    locks = [run_lock_path(run_dir), *sorted((run_dir / PARTS_DIR).glob(f"*{PART_LOCK_SUFFIX}"))]
    return [h for path in locks if (h := holder_of(path)) is not None]


class RunLock:
    """The locks one writer of a run folder holds: the run's (exclusive), or for a part the run's shared and the part's own."""

    def __init__(self, run_dir: Path, part: str | None = None):
        self.run_dir, self.part = run_dir, part
        self._run = FolderLock(run_lock_path(run_dir))
        self._part = FolderLock(run_dir / PARTS_DIR / f"{part}{PART_LOCK_SUFFIX}") if part is not None else None

    def acquire(self, role: str, wait_s: float = 0.0) -> RunLock:
        """Take the locks, or raise BadInput naming who holds them."""
        started = time.monotonic()
        if not self._run.acquire(role, shared=self._part is not None, wait_s=wait_s):
            raise locked(self.run_dir, writers(self.run_dir), wait_s)
        if self._part is not None:
            self._part.path.parent.mkdir(exist_ok=True)
            if not self._part.acquire(f"part {self.part}", wait_s=max(0.0, wait_s - (time.monotonic() - started))):
                self._run.release()
                raise locked(self.run_dir, [h for h in [holder_of(self._part.path)] if h], wait_s)
        return self

    def release(self) -> None:
        if self._part is not None:
            self._part.release()
        self._run.release()


def locked(run_dir: Path, holders: list[Holder], waited_s: float) -> BadInput:
    """The error for a run folder another process is writing, naming who."""
    who = "; ".join(h.describe() for h in holders) or "another process (it has not said who yet)"
    waited = f" (waited {waited_s:g} s)" if waited_s > GRACE_S else ""
    return BadInput(
        f"run folder {run_dir} is being written by {who}{waited}. One writer at a time: let it finish, "
        "or wait for it with --wait-for-lock SECONDS"
    )
