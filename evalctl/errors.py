"""The errors evalctl reports to its user: one tree, each kind with its exit status.

Library code raises these with a message that names the cause; the CLI turns any of them
into "error: <message>" and the exit status, in one place (`cli.common.exits_on_error`).
"""

from __future__ import annotations

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_IO = 5


class EvalctlError(Exception):
    """Something evalctl could not do; `exit_code` is the CLI's exit status for it."""

    exit_code = EXIT_ERROR


class BadInput(EvalctlError, ValueError):
    """Input the user can fix (config, policy, run folder, options): exit status 2."""

    exit_code = EXIT_USAGE


class DiskError(EvalctlError, OSError):
    """The disk refused a write (full, over quota, read-only, no permission): exit status 5.

    An OSError too, so code that handles file errors still does; `filename` is the file refused."""

    exit_code = EXIT_IO

    def __str__(self) -> str:
        return f"cannot write {self.filename}: {self.strerror}"
