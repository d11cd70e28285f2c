"""SIGINT/SIGTERM as an orderly stop: no new requests, a short wait for those in flight, records kept, every server
stopped, exit 128 + signal number (`errors.ExitCode`).

A signal in plain code raises `Interrupted` at once, so every `finally` (server teardown) runs. While requests are
in flight (`graceful`, one event per thread's loop: launches side by side) it sets the events instead, and each
thread raises at its next `check`. A second signal always raises at once.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from contextlib import contextmanager

from evalctl.errors import ExitCode


class Interrupted(KeyboardInterrupt):
    """Raised for SIGINT/SIGTERM; a KeyboardInterrupt so nothing swallows it as an error."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_status(self) -> ExitCode:
        return ExitCode(128 + self.signum)


class Shutdown:
    """Holds the first stop signal received; `install` makes it the process's handler."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._graceful: dict[asyncio.AbstractEventLoop, asyncio.Event] = {}  # a loop a thread sending requests

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @contextmanager
    def install(self) -> Iterator[Shutdown]:
        previous = {sig: signal.signal(sig, self._handle) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _handle(self, signum: int, frame: object) -> None:
        self.check()  # a second signal raises at once
        self.signum = signum
        if not self._graceful:
            raise Interrupted(signum)
        for loop, event in list(self._graceful.items()):
            loop.call_soon_threadsafe(event.set)

    def check(self) -> None:
        """Raise `Interrupted` if a stop signal has arrived."""
        if self.signum is not None:
            raise Interrupted(self.signum)

    @contextmanager
    def graceful(self, stop: asyncio.Event) -> Iterator[None]:
        """Within a running event loop: a signal sets `stop` instead of raising."""
        loop = asyncio.get_running_loop()
        self._graceful[loop] = stop
        try:
            if self.signum is not None:
                stop.set()
            yield
        finally:
            del self._graceful[loop]
