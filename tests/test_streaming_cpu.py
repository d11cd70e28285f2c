"""Streamed completions against the real llama.cpp CPU server: the same answer as the
non-streamed path, plus the timings only a stream can give."""

from __future__ import annotations

import asyncio

import pytest

from evalctl.client import CompletionClient, RequestSettings
from evalctl.tasks.lmeval import LmEvalTask

pytestmark = pytest.mark.server


def test_streamed_answers_equal_non_streamed_ones(cpu_server, data_dir):
    prompts = LmEvalTask("gsm8k", data_dir=data_dir, fewshot="shared").prompts(2, 3)
    # One request at a time, cache off on both paths: a batch shared with another request or a prefix
    # hit changes llama.cpp's batch split, and with it the last bits of the logits.
    params = {"max_tokens": 32, "temperature": 0.0, "seed": 1, "cache_prompt": False, "stop": list(prompts[0].stop)}

    async def answers(stream: bool) -> list:
        async with CompletionClient(cpu_server, RequestSettings(model="m", max_retries=0, stream=stream)) as client:
            return await asyncio.gather(*(client.complete(p.text, **params) for p in prompts))

    whole, streamed = asyncio.run(answers(False)), asyncio.run(answers(True))
    assert all(c.error is None for c in whole + streamed), [c.error for c in whole + streamed]
    for w, s in zip(whole, streamed):
        assert s.text == w.text and s.text  # identical text, and not empty
        assert (s.finish_reason, s.prompt_tokens, s.completion_tokens, s.cached_tokens) == (
            w.finish_reason, w.prompt_tokens, w.completion_tokens, w.cached_tokens
        )  # usage from the final chunk  # fmt: skip
        assert w.ttft_s is None and w.itl_s is None
        assert 0 < s.ttft_s < s.latency_s
        assert s.completion_tokens < 2 or 0 < s.itl_s < s.latency_s
