"""Send one cell's requests, each completion handed on as it arrives, while watching the server process and the stop signal.

Not lm-eval's API models: they record no usage, latency or cached tokens and left-truncate long prompts silently;
this sends every prompt whole. lm-eval still builds and scores the prompts (`tasks.lmeval`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from evalctl.client import Completion, CompletionClient
from evalctl.servers.process import ManagedServer
from evalctl.signals import Shutdown

# After SIGINT/SIGTERM, how long requests in flight may still finish (and be recorded).
INTERRUPT_GRACE_S = 3.0
# How often a launched server's process is checked while requests run.
WATCH_INTERVAL_S = 0.5

OnComplete = Callable[[int, Completion], None]


async def send(
    make_client: Callable[[], CompletionClient],
    requests: list[tuple[str, dict]],
    on_complete: OnComplete,
    chains: list[list[int]] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Send each (prompt, its own params) request, its completion handed to `on_complete` with its index; the indices
    of a chain (a conversation's turns) go one after another's answer. Once `stop` is set nothing new is sent."""
    async with make_client() as client:
        items = [(i, text, params) for i, (text, params) in enumerate(requests)]
        grouped = [[items[i] for i in chain] for chain in chains] if chains is not None else [[item] for item in items]
        async for index, completion in client.map_chains(grouped, stop):
            on_complete(index, completion)


async def _exited(server: ManagedServer) -> None:
    while server.exit_code() is None:
        await asyncio.sleep(WATCH_INTERVAL_S)


async def send_watched(
    server: ManagedServer,
    shutdown: Shutdown,
    make_client: Callable[[], CompletionClient],
    requests: list[tuple[str, dict]],
    on_complete: OnComplete,
    chains: list[list[int]],
) -> bool:
    """`send` the requests (`on_complete` records each); False when cut short: the server died (requests still out are
    dropped) or a stop signal came (those in flight had INTERRUPT_GRACE_S to finish)."""
    stop = asyncio.Event()
    sending = asyncio.create_task(send(make_client, requests, on_complete, chains, stop))
    died = asyncio.create_task(_exited(server))  # external servers: never (evalctl does not own them)
    stopped = asyncio.create_task(stop.wait())
    with shutdown.graceful(stop):
        try:
            await asyncio.wait({sending, died, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if sending.done():
                sending.result()  # re-raise a bug in recording, if any
                return True
            if not died.done():  # a signal; after a death, requests still out would only fail with connection errors
                await asyncio.wait({sending}, timeout=INTERRUPT_GRACE_S)
            return False
        finally:
            for task in (sending, died, stopped):
                task.cancel()
            await asyncio.gather(sending, died, stopped, return_exceptions=True)
