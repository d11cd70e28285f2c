"""The errors evalctl reports to its user, and the one table of exit statuses every command uses.

Exit status: one table for every command, `ExitCode` (pytest's convention: the verdicts first,
then the tool's own failures). A verdict and a tool failure never share a code, so a nightly job
can tell "the build regressed" from "the tool could not read its input":

    0    PASS          done; the verdict (gate, probe, sweep --wait) is pass
    1    REGRESSION    the verdict is regression (probe: a bin diverges)
    2    INCONCLUSIVE  the verdict is inconclusive: the data could not decide
    3    RUN_FAILED    run or server failure: a cell, server, probe or job failed
    4    BAD_INPUT     usage or bad input: options, config, policy, run folder
    5    INTERNAL      I/O error (disk, permissions) or a bug in evalctl
    130  INTERRUPTED   stopped by SIGINT (Ctrl-C): 128 + signal number
    143  TERMINATED    stopped by SIGTERM

Library code raises the errors below with a message that names the cause; the CLI turns any
of them into "error: <message>" and its `exit_status`, in one place (`cli.common.exits_on_error`),
and click's own usage errors into BAD_INPUT (`cli.common.EvalctlGroup`; click alone exits 2).
Any other OSError (a disk that fails a read) is INTERNAL too; any other exception is a bug.

Every public error is defined here (the modules that raise them import them from here):

    EvalctlError                  5 INTERNAL (and two modules registering one name)
    ├── BadInput (ValueError)     4 BAD_INPUT
    │   ├── ConfigError           a config that cannot be used
    │   ├── ManifestError         a manifest.json missing or not evalctl's
    │   ├── GateFileError         a gate.json that cannot be read
    │   ├── NeverStarts           Slurm jobs that can never start as asked
    │   ├── BuildInputError       a bisect repository, revision or builds file
    │   ├── StateError            a bisect folder that cannot be resumed
    │   └── VenvBuildError        a build's pip requirements pip cannot install
    ├── RunFailed                 3 RUN_FAILED
    │   ├── ServerError           a server that would not start or died
    │   │   └── PortTaken         its port answered for another launch's server
    │   └── ProbeError            the probe could not run as designed
    └── DiskError (OSError)       5 INTERNAL: the disk refused a write

Each class below its exit status's is one some code catches by name; every other failure raises
the class of its exit status with a message that names the cause.
"""

from __future__ import annotations

import enum
import signal


class ExitCode(enum.IntEnum):
    """The exit statuses of every evalctl command; each carries its one-line meaning (`table`)."""

    meaning: str

    def __new__(cls, value: int, meaning: str) -> ExitCode:
        member = int.__new__(cls, value)
        member._value_ = value
        member.meaning = meaning
        return member

    PASS = 0, "done; the verdict (gate, probe, sweep --wait) is pass"
    REGRESSION = 1, "the verdict is regression (probe: a bin diverges)"
    INCONCLUSIVE = 2, "the verdict is inconclusive: the data could not decide"
    RUN_FAILED = 3, "run or server failure: a cell, server, probe or job failed"
    BAD_INPUT = 4, "usage or bad input: options, config, policy, run folder"
    INTERNAL = 5, "I/O error (disk, permissions) or a bug in evalctl"
    INTERRUPTED = 128 + signal.SIGINT, "stopped by SIGINT (Ctrl-C): 128 + signal number"
    TERMINATED = 128 + signal.SIGTERM, "stopped by SIGTERM"

    @classmethod
    def table(cls) -> list[str]:
        """The table as lines, as this module's docstring and `evalctl --help` show it."""
        return [f"{code.value:<4} {code.name:<13} {code.meaning}" for code in cls]


# A verdict ("pass", "regression", "inconclusive") -> its exit status.
VERDICT_EXIT: dict[str, ExitCode] = {code.name.lower(): code for code in (ExitCode.PASS, ExitCode.REGRESSION, ExitCode.INCONCLUSIVE)}


class EvalctlError(Exception):
    """Something evalctl could not do; `exit_status` is the CLI's exit status for it."""

    exit_status = ExitCode.INTERNAL


class BadInput(EvalctlError, ValueError):
    """Input the user can fix (config, policy, run folder, options): exit status 4."""

    exit_status = ExitCode.BAD_INPUT


class ConfigError(BadInput):
    """A config that cannot be used; the message names the cause."""


class ManifestError(BadInput):
    """A manifest.json that is missing, unreadable or not an evalctl manifest."""


class GateFileError(BadInput):
    """A gate.json that cannot be read, is not a gate document, or is from a newer evalctl."""


class NeverStarts(BadInput):
    """Pending jobs Slurm will never start as they are (exit 4): the run's jobs are cancelled."""


class BuildInputError(BadInput):
    """A repository, revision or builds file the bisect cannot use; the message says why."""


class StateError(BadInput):
    """A bisect folder that cannot be resumed; the message says why."""


class VenvBuildError(BadInput):
    """Requirements pip cannot install (no such version, no wheel for this platform); the message carries pip's reason."""


class RunFailed(EvalctlError):
    """A server, a job or the run itself could not do its work: exit status 3."""

    exit_status = ExitCode.RUN_FAILED


class ServerError(RunFailed):
    """A server that would not start or that died; carries its log tail and the process's own `exit_code`."""

    def __init__(self, message: str, *, exit_code: int | None = None, log_tail: str = ""):
        super().__init__(message)
        self.exit_code = exit_code
        self.log_tail = log_tail

    def __str__(self) -> str:
        text = super().__str__()
        if self.log_tail:
            text += "\n--- server log (last lines) ---\n" + self.log_tail
        return text


class PortTaken(ServerError):
    """The launched server's port answers for another process: a launch that drew the same free port
    bound it first. evalctl draws another port and launches again (a profile's fixed `port`: it stops)."""


class ProbeError(RunFailed):
    """The probe could not run as designed (e.g. no way to make a cold request)."""


class DiskError(EvalctlError, OSError):
    """The disk refused a write (full, over quota, read-only, no permission): exit status 5 (I/O).

    An OSError too, so code that handles file errors still does; `filename` is the file refused."""

    def __str__(self) -> str:
        return f"cannot write {self.filename}: {self.strerror}"
