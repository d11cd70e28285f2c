"""Send the probe, one request at a time (the order is what puts state in the cache): each prompt greedily cold
twice, then warm once.

Cold: the cache flushed and switched off per request (where the engine can); the response must report no
cached tokens. The second cold run measures the engine's own run-to-run disagreement: the baseline. Warm:
after a flush, every prompt, longest prefix first, right after its prefix alone (one token generated), so
the state at the prefix's end is the newest the server holds. A hybrid engine keeps a recurrent state only
where a request ended (vLLM's `--mamba-cache-mode align`) and cannot trim one back to a shorter prefix
(llama.cpp recomputes from token 0): a prompt sent after another or after a longer prefix would find no
state at its own prefix's end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import httpx

from evalctl.client import Completion, CompletionClient, RequestSettings, server_http
from evalctl.errors import ProbeError
from evalctl.probe.policy import ProbePolicy
from evalctl.probe.prompts import ProbePrompt
from evalctl.schema import CacheMode
from evalctl.servers.base import EngineAdapter


@dataclass(frozen=True)
class ProbeSample:
    prompt: ProbePrompt
    cold: Completion
    cold_repeat: Completion
    warm: Completion


@dataclass(frozen=True)
class ProbeRun:
    samples: list[ProbeSample]
    seeds: list[Completion]
    flushed: bool  # whether the engine could flush its cache

    @property
    def generated_tokens(self) -> int:
        completions = [c for s in self.samples for c in (s.cold, s.cold_repeat, s.warm)] + self.seeds
        return sum(c.completion_tokens or 0 for c in completions)


@dataclass
class ProbeRunner:
    base_url: str
    adapter: EngineAdapter
    policy: ProbePolicy
    request: RequestSettings  # the model, key and timeout of every request; the probe sets how they are sampled
    on_step: Callable[[str], None] = field(kw_only=True)

    def _client(self, cache: CacheMode) -> CompletionClient:
        """Greedy requests one at a time with the engine's `cache` switch, asking for the policy's top alternatives."""
        settings = replace(
            self.request,
            max_retries=2,
            max_tokens=self.policy.max_tokens,
            temperature=0.0,
            logprobs=self.policy.top_logprobs or None,
            fields=self.adapter.request_fields(cache),
            cached_tokens_if_missing=self.adapter.cached_tokens_if_missing,
        )
        return CompletionClient(self.base_url, settings)

    def _flush(self) -> bool:
        try:
            with server_http(self.base_url, self.request.api_key, 30.0) as http:
                return self.adapter.flush(http)
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            return False

    def run(self, prompts: list[ProbePrompt]) -> ProbeRun:
        if not prompts:
            raise ProbeError("no probe prompts: every prefix was shorter than min_prefix_tokens")
        return asyncio.run(self._run(prompts))

    async def _run(self, prompts: list[ProbePrompt]) -> ProbeRun:
        async with self._client(CacheMode.off) as cold_client, self._client(CacheMode.on) as warm_client:
            colds = []
            flushed = True
            for i, prompt in enumerate(prompts, 1):
                self.on_step(f"cold {i}/{len(prompts)}: {prompt.bin}")
                pair = []
                for _ in range(2):
                    flushed = self._flush() and flushed
                    pair.append(await self._cold(cold_client, prompt))
                colds.append(pair)
            self._flush()
            seeds = []
            warms: dict[int, Completion] = {}
            order = sorted(range(len(prompts)), key=lambda i: len(prompts[i].prefix), reverse=True)
            for n, i in enumerate(order, 1):
                self.on_step(f"warm {n}/{len(prompts)}: {prompts[i].bin}")
                seed = await warm_client.complete(prompts[i].prefix, max_tokens=1, logprobs=None)
                if seed.error:
                    raise ProbeError(f"seeding the prefix cache failed: {seed.error}")
                seeds.append(seed)
                warms[i] = await warm_client.complete(prompts[i].text, stop=list(prompts[i].stop) or None)
        samples = [ProbeSample(p, cold, again, warms[i]) for i, (p, (cold, again)) in enumerate(zip(prompts, colds))]
        return ProbeRun(samples, seeds, flushed)

    async def _cold(self, client: CompletionClient, prompt: ProbePrompt) -> Completion:
        completion = await client.complete(prompt.text, stop=list(prompt.stop) or None)  # None: no stop field
        if completion.error:
            raise ProbeError(f"cold request ({prompt.bin}) failed: {completion.error}")
        if completion.cached_tokens:
            raise ProbeError(
                f"a cold request ({prompt.bin}) reused {completion.cached_tokens} cached tokens: this engine can neither flush "
                f"its cache nor switch it off per request here (with --url, name the engine: --engine)"
            )
        return completion
