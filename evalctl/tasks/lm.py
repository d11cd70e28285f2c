"""The served model as an lm-eval `LM`: concurrent requests with telemetry.

lm-eval's own API models record no usage, latency or cached tokens and
left-truncate long prompts silently; this one sends every prompt whole and
hands each completion to a callback as soon as it arrives.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from lm_eval.api.model import LM
from lm_eval.api.registry import register_model

from evalctl.client import Completion, CompletionClient

OnComplete = Callable[[int, Completion], None]


@register_model("evalctl-served")
class ServedLM(LM):
    def __init__(self, make_client: Callable[[], CompletionClient], params: dict, on_complete: OnComplete | None = None):
        super().__init__()
        self.make_client = make_client
        self.params = params
        self.on_complete = on_complete

    def generate_until(self, requests, disable_tqdm: bool = True) -> list[str]:
        return asyncio.run(self.agenerate([(inst.args[0], inst.args[1]) for inst in requests]))

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

    def loglikelihood(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError("evalctl scores generation tasks only")

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError("evalctl scores generation tasks only")
