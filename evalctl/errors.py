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


VERDICT_EXIT: dict[str, ExitCode] = {
    "pass": ExitCode.PASS,
    "regression": ExitCode.REGRESSION,
    "inconclusive": ExitCode.INCONCLUSIVE,
}


class EvalctlError(Exception):
    """Something evalctl could not do; `exit_status` is the CLI's exit status for it."""

    exit_status = ExitCode.INTERNAL


class BadInput(EvalctlError, ValueError):
    """Input the user can fix (config, policy, run folder, options): exit status 4."""

    exit_status = ExitCode.BAD_INPUT


class ConfigError(BadInput):
    """A config that cannot be used; the message names the cause."""


class UnknownName(BadInput):
    """A name no registry holds (an engine, a task, a gate check kind, ...); the message lists the known ones."""

    def __init__(self, kind: str, names: list[str], known: list[str], where: str = "") -> None:
        # `where` follows the name: " in my_tasks/", " (gate policy section checks:)".
        self.kind, self.names, self.known = kind, names, known
        which = f"unknown {kind} {names[0]!r}" if len(names) == 1 else f"unknown {kind}s {', '.join(map(repr, names))}"
        super().__init__(f"{which}{where}; known: {', '.join(known) or '(none)'}")


class AlreadyRegistered(EvalctlError):
    """Two modules register different things under one name: a bug in one of them (exit status 5)."""


class RunFailed(EvalctlError):
    """A server, a job or the run itself could not do its work: exit status 3."""

    exit_status = ExitCode.RUN_FAILED


class DiskError(EvalctlError, OSError):
    """The disk refused a write (full, over quota, read-only, no permission): exit status 5 (I/O).

    An OSError too, so code that handles file errors still does; `filename` is the file refused."""

    exit_status = ExitCode.INTERNAL

    def __str__(self) -> str:
        return f"cannot write {self.filename}: {self.strerror}"
