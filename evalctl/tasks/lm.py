"""The served model: a cell's prompts sent concurrently, each completion handed on as it arrives.

Not lm-eval's API models: they record no usage, latency or cached tokens and left-truncate
long prompts silently; this sends every prompt whole. lm-eval still builds and scores the
prompts (`tasks.lmeval`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from evalctl.client import Completion, CompletionClient


@dataclass
class ServedLM:
    make_client: Callable[[], CompletionClient]
    on_complete: Callable[[int, Completion], None] | None = None
    chains: list[list[int]] | None = None  # indices into the requests, each sent one after another's answer (a conversation's turns)

    async def agenerate(self, requests: list[tuple[str, dict]], stop: asyncio.Event | None = None) -> list[str]:
        """Completions in request order; a failed or (once `stop` is set) unsent request yields "" (a failure reaches
        `on_complete` as an error)."""
        texts = [""] * len(requests)
        async with self.make_client() as client:
            # A request's stop strings (the task's `until`) unless the settings fix them (the config's generation.stop).
            own = client.settings.stop is None
            items = [(i, text, _params(kw, own)) for i, (text, kw) in enumerate(requests)]
            grouped = [[items[i] for i in chain] for chain in self.chains] if self.chains is not None else [[item] for item in items]
            async for index, completion in client.map_chains(grouped, stop):
                texts[index] = completion.text or ""
                if self.on_complete:
                    self.on_complete(index, completion)
        return texts


def _params(kwargs: dict, own_stop: bool) -> dict:
    """A request's own parameters from lm-eval's generation kwargs: `until` (unless the settings fix stop), `max_gen_toks`."""
    params: dict = {"stop": list(kwargs["until"])} if own_stop and kwargs.get("until") else {}
    if "max_gen_toks" in kwargs:
        params["max_tokens"] = kwargs["max_gen_toks"]
    return params
