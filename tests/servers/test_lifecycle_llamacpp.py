"""The one server lifecycle (servers/process.py), exercised through a real llama.cpp CPU server."""

from __future__ import annotations

import psutil
import pytest

from evalctl.config import CacheMode, ServerProfile, Variant
from evalctl.servers.process import ManagedServer

pytestmark = pytest.mark.server

PROFILE = ServerProfile(name="cpu", model_path="bundled:smollm2-135m", parallel=1, context_length=1024, startup_timeout_s=120)
PROMPT = "Question: Tom has 3 apples and buys 4 more. How many apples does he have?\nAnswer:"


def complete(server: ManagedServer) -> dict:
    with server.http(timeout=120) as http:
        response = http.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 4, "temperature": 0, "cache_prompt": True})
        response.raise_for_status()
        return response.json()


def test_metrics_scrape_flush_and_restart(tmp_path, no_orphans):
    server = ManagedServer(PROFILE, Variant(), CacheMode.on, tmp_path / "server.log")
    server.start()
    try:
        with server.http() as http:
            before = server.adapter.scrape_metrics(http)
        complete(server)
        complete(server)  # same prompt again: served from the slot's cache
        with server.http() as http:
            after = server.adapter.scrape_metrics(http)
            assert server.adapter.flush(http)
        assert set(after) == {"prompt_tokens_evaluated", "cached_tokens", "tokens_predicted"}
        assert after["tokens_predicted"] - before["tokens_predicted"] == 8
        assert after["cached_tokens"] > before["cached_tokens"]
        assert complete(server)["usage"]["prompt_tokens_details"]["cached_tokens"] == 0  # flushed: cold again

        first = server.process.pid
        server.stop()
        server.start()  # what a restart after a crash does: same command, a fresh process
        assert not psutil.pid_exists(first) or psutil.Process(first).status() == psutil.STATUS_ZOMBIE
        assert complete(server)["choices"][0]["text"]  # serves again after the restart
    finally:
        server.stop()
