"""The served model: a cell's prompts sent concurrently, each completion handed on as it arrives.

Not lm-eval's API models: they record no usage, latency or cached tokens and left-truncate
long prompts silently; this sends every prompt whole. lm-eval still builds and scores the
prompts (`tasks.lmeval`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from evalctl.client import Completion, CompletionClient

OnComplete = Callable[[int, Completion], None]


class ServedLM:
    def __init__(
        self,
        make_client: Callable[[], CompletionClient],
        params: dict,
        on_complete: OnComplete | None = None,
        chains: list[list[int]] | None = None,
    ):
        """`chains` (indices into the requests `agenerate` gets): each chain sent in order, one request
        after another's answer (a conversation's turns); default: every request on its own."""
        self.make_client = make_client
        self.chains = chains
        self.params = params
        self.on_complete = on_complete

    async def agenerate(self, requests: list[tuple[str, dict]], stop: asyncio.Event | None = None) -> list[str]:
        """Completions in request order; failures yield "" and reach `on_complete` as errors.

        Once `stop` is set no new request is sent; unsent ones yield "" and no callback.
        """
        items = []
        for index, (context, gen_kwargs) in enumerate(requests):
            params = dict(self.params)
            if gen_kwargs.get("until") and "stop" not in params:
                params["stop"] = list(gen_kwargs["until"])
            items.append((index, context, params))
        texts = [""] * len(items)
        async with self.make_client() as client:
            grouped = [[items[i] for i in chain] for chain in self.chains] if self.chains is not None else [[item] for item in items]
            async for index, completion in client.map_chains(grouped, stop):
                texts[index] = completion.text or ""
                if self.on_complete:
                    self.on_complete(index, completion)
        return texts
