"""Send one cell's requests while watching the server process and the stop signal."""

from __future__ import annotations

import asyncio
import enum

from evalctl.servers.process import ManagedServer
from evalctl.signals import Shutdown
from evalctl.tasks.lm import ServedLM

# After SIGINT/SIGTERM, how long requests in flight may still finish (and be recorded).
INTERRUPT_GRACE_S = 3.0
# How often a launched server's process is checked while requests run.
WATCH_INTERVAL_S = 0.5


class Outcome(enum.Enum):
    done = "done"  # every request got a row
    server_died = "server_died"  # the server process exited; unfinished requests were dropped
    interrupted = "interrupted"  # a stop signal; in-flight requests had INTERRUPT_GRACE_S to finish


async def _exited(server: ManagedServer) -> None:
    while server.exit_code() is None:
        await asyncio.sleep(WATCH_INTERVAL_S)


async def send_watched(lm: ServedLM, requests: list[tuple[str, dict]], server: ManagedServer, shutdown: Shutdown) -> Outcome:
    """Run `requests` through `lm` (its callback records each); stop early when the server dies or a signal comes."""
    stop = asyncio.Event()
    sending = asyncio.create_task(lm.agenerate(requests, stop))
    died = asyncio.create_task(_exited(server))  # external servers: never (evalctl does not own them)
    stopped = asyncio.create_task(stop.wait())
    with shutdown.graceful(stop):
        try:
            await asyncio.wait({sending, died, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if sending.done():
                sending.result()  # re-raise a bug in recording, if any
                return Outcome.done
            if died.done():
                # Requests still out would only fail with connection errors: drop them, they are re-sent.
                return Outcome.server_died
            await asyncio.wait({sending}, timeout=INTERRUPT_GRACE_S)
            return Outcome.interrupted
        finally:
            for task in (sending, died, stopped):
                task.cancel()
            await asyncio.gather(sending, died, stopped, return_exceptions=True)
