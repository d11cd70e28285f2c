"""The canary's fault semantics: prompt rewriting (pure) and one real proxied request."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

from evalctl.canary.faults import (
    MIN_SHARED_CHARS,
    PromptMemory,
    corrupt_cached_suffix,
    cross_talk,
    fail_on_hit,
    lost_prefix,
    truncate_prompt,
)
from evalctl.canary.proxy import Canary, CanaryServer, _is_flush

PREFIX = "Question: Ann has 3 apples and buys 4 more. How many?\nAnswer: 3 + 4 = 7. #### 7\n\n"


def test_lost_prefix_forwards_only_the_unshared_part():
    prompt = PREFIX + "Question: Bob has 2 pears.\nAnswer:"
    rewrite = lost_prefix(prompt, len(PREFIX), 0, None)
    assert rewrite.prompt == "Question: Bob has 2 pears.\nAnswer:"
    assert rewrite.cached_chars == len(PREFIX)
    # a prompt seen whole before still computes its last character, like a cache hit does
    assert lost_prefix(prompt, len(prompt), 0, None).prompt == ":"
    # a coincidental short overlap is not a cache hit
    assert lost_prefix(prompt, MIN_SHARED_CHARS - 1, 0, None).prompt == prompt


def test_corrupt_cached_suffix_garbles_the_end_of_the_shared_prefix():
    prompt = PREFIX + "Question: Bob?\nAnswer:"
    rewrite = corrupt_cached_suffix(prompt, len(PREFIX), 10, None)
    assert len(rewrite.prompt) == len(prompt)
    assert rewrite.prompt[: len(PREFIX) - 10] == PREFIX[:-10]
    assert rewrite.prompt[len(PREFIX) - 10 : len(PREFIX)] == PREFIX[-10:][::-1]
    assert rewrite.prompt.endswith("Question: Bob?\nAnswer:")


def test_truncate_prompt_keeps_the_tail():
    assert truncate_prompt("abcdef", 0, 4, None).prompt == "cdef"
    assert truncate_prompt("abc", 0, 4, None).prompt == "abc"


def test_fail_on_hit_fails_the_first_attempt_of_a_cache_hit_and_passes_its_retry_unchanged():
    assert fail_on_hit(PREFIX + "Q", len(PREFIX), 0, None).fail_status == 500
    assert fail_on_hit(PREFIX + "Q", MIN_SHARED_CHARS - 1, 0, None).fail_status is None  # not a cache hit
    seen = []
    canary = Canary("http://upstream", "fail-on-hit")
    canary.http = httpx.Client(
        base_url="http://upstream",
        transport=httpx.MockTransport(
            lambda request: seen.append(json.loads(request.content)) or httpx.Response(200, json={"choices": []})
        ),
    )

    def send(prompt: str, **fields: object) -> tuple[int, str]:
        response, _, note = canary.completions("/v1/completions", json.dumps({"prompt": prompt, **fields}).encode(), {})
        return response.status_code, note

    assert send(PREFIX + "Q1") == (200, "clean")
    assert send(PREFIX + "Q2") == (500, "failed the first attempt with HTTP 500")
    assert send(PREFIX + "Q2") == (200, "a retry, passed on")
    assert send(PREFIX + "Q3", cache_prompt=False) == (200, "clean")  # a cold request never hits
    assert send(PREFIX + "Q2") == (500, "failed the first attempt with HTTP 500")  # the same prompt sent anew (pass 2)
    assert [body["prompt"] for body in seen] == [PREFIX + "Q1", PREFIX + "Q2", PREFIX + "Q3"]  # unchanged, each once
    assert (canary.requests, canary.rewritten) == (5, 2)


def test_cross_talk_swaps_a_prefix_only_while_another_request_is_in_flight():
    mine, theirs = "records: a=1 b=2 | asked: a", "records: a=7 b=9 | asked: b"
    assert cross_talk(mine, 0, 0, None).prompt == mine  # alone at the proxy: untouched
    assert cross_talk(mine, 0, 0, theirs).prompt == theirs[:24] + mine[24:]  # nine tenths of it from the other request
    assert cross_talk(mine, 0, 4, theirs).prompt == "reco" + mine[4:] and cross_talk(mine, 0, 4, theirs).cached_chars == 0
    seen, arrived, release = [], threading.Event(), threading.Event()

    def upstream(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content)["prompt"])
        if len(seen) == 1:
            arrived.set()
            release.wait(5)  # the first request is still in flight when the second arrives
        return httpx.Response(200, json={"choices": []})

    canary = Canary("http://upstream", "cross-talk")
    canary.http = httpx.Client(base_url="http://upstream", transport=httpx.MockTransport(upstream))
    first = threading.Thread(target=canary.completions, args=("/v1/completions", json.dumps({"prompt": theirs}).encode(), {}))
    first.start()
    assert arrived.wait(5)
    _, _, note = canary.completions("/v1/completions", json.dumps({"prompt": mine, "cache_prompt": False}).encode(), {})
    release.set()
    first.join()
    assert seen == [theirs, theirs[:24] + mine[24:]] and note == f"forwarded {len(mine)}/{len(mine)} chars"  # cache on or off
    assert canary.in_flight == [] and (canary.requests, canary.rewritten) == (2, 1)


def test_memory_and_flush_paths():
    memory = PromptMemory()
    memory.add(PREFIX + "Q1")
    assert memory.longest_shared(PREFIX + "Q2") == len(PREFIX) + 1  # "Q" is shared too
    memory.clear()
    assert memory.longest_shared(PREFIX + "Q2") == 0
    assert _is_flush("POST", "/slots/0?action=erase") and _is_flush("POST", "/flush_cache") and _is_flush("POST", "/reset_prefix_cache")
    assert not _is_flush("GET", "/slots") and not _is_flush("POST", "/slots/0?action=save")


@pytest.mark.server
def test_lost_prefix_through_a_real_server(cpu_server):
    proxy = CanaryServer(Canary(cpu_server, "lost-prefix"))
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        with httpx.Client(base_url=proxy.url, timeout=120) as http:
            assert http.get("/health").status_code == 200  # passed through
            body = {"max_tokens": 2, "temperature": 0}
            first = http.post("/v1/completions", json={**body, "prompt": PREFIX + "Question: Bob has 2 pears.\nAnswer:"})
            assert first.headers["x-evalctl-canary"] == "lost-prefix; clean"
            prompt = PREFIX + "Question: Cy has 5 plums.\nAnswer:"
            second = http.post("/v1/completions", json={**body, "prompt": prompt})
            forwarded = len(prompt) - len(PREFIX) - len("Question: ")
            assert second.headers["x-evalctl-canary"] == f"lost-prefix; forwarded {forwarded}/{len(prompt)} chars"
            usage = second.json()["usage"]
            full = len(http.post("/tokenize", json={"content": prompt}).json()["tokens"])
            assert usage["prompt_tokens"] == full  # looks like the whole prompt was served
            assert usage["prompt_tokens_details"]["cached_tokens"] >= full - 15  # and claims the prefix hit the cache
            # a cold request is not faulted; a flush (passed through) empties the canary's memory
            cold = http.post("/v1/completions", json={**body, "prompt": prompt, "cache_prompt": False})
            assert cold.headers["x-evalctl-canary"] == "lost-prefix; clean"
            assert http.post("/slots/0", params={"action": "erase"}).status_code == 200
            again = http.post("/v1/completions", json={**body, "prompt": prompt})
            assert again.headers["x-evalctl-canary"] == "lost-prefix; clean"
        assert proxy.canary.rewritten == 1
    finally:
        proxy.shutdown()
        proxy.server_close()
