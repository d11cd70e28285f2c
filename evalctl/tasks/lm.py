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
    def __init__(self, make_client: Callable[[], CompletionClient], params: dict, on_complete: OnComplete | None = None):
        self.make_client = make_client
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
            async for index, completion in client.map(items, stop):
                texts[index] = completion.text or ""
                if self.on_complete:
                    self.on_complete(index, completion)
        return texts
