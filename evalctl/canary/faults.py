"""Named faults: how the canary rewrites a prompt before the real server sees it. Pure functions.

Each imitates a class of serving bug that is silent (no error, plausible usage):
- `lost-prefix`: a request sharing a prefix with an earlier one is computed from the part after the longest shared
  prefix only: the cached prefix is forgotten (the SGLang Mamba bug that motivated evalctl).
- `corrupt-cached-suffix`: on such a hit, the last `chars` characters of the shared prefix arrive garbled
  (reversed): stale state at the end of the cached blocks.
- `truncate-prompt`: a prompt longer than `chars` characters is cut from the left to its last `chars` (silent
  context truncation); cold and warm requests alike, so the probe cannot see it, only accuracy by prompt length can.
- `no-cache`: every request is sent with prefix caching off (`cache_prompt: false`, llama.cpp's per-request switch),
  usage passed on as the server reports it: a cache that silently never engages.
- `fail-on-hit`: a request that would hit the cache is answered HTTP 500 on its first attempt, its retry passed on
  unchanged: every answer is right and no request fails; only the retries tell (the gate's `first-attempt` check).
- `cross-talk`: a request arriving while another is in flight is sent with the first `chars` characters of its
  prompt (default: nine tenths) taken from the other's: one request's state leaking into another's (a llama.cpp
  server answered one client from another's system prompt). Concurrency 1 is healthy; a sweep's higher levels lose answers.
- `none`: nothing is changed, the healthy control (e.g. a good build in a bisect test).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

# A shared prefix shorter than this is a coincidence ("Question: "), not a cache hit.
MIN_SHARED_CHARS = 32


@dataclass(frozen=True)
class Rewrite:
    prompt: str  # what the upstream server is sent
    cached_chars: int  # leading characters of the original the server claims to have served from cache
    fail_status: int | None = None  # answer the first attempt with this HTTP status instead; its retry passes unchanged


def lost_prefix(prompt: str, shared: int, chars: int, other: str | None) -> Rewrite:
    if shared < MIN_SHARED_CHARS:
        return Rewrite(prompt, 0)
    shared = min(shared, len(prompt) - 1)  # a repeated prompt still computes its last character
    return Rewrite(prompt[shared:], shared)


def corrupt_cached_suffix(prompt: str, shared: int, chars: int, other: str | None) -> Rewrite:
    if shared < MIN_SHARED_CHARS:
        return Rewrite(prompt, 0)
    start = max(0, shared - chars)
    return Rewrite(prompt[:start] + prompt[start:shared][::-1] + prompt[shared:], shared)


def truncate_prompt(prompt: str, shared: int, chars: int, other: str | None) -> Rewrite:
    return Rewrite(prompt[-chars:] if len(prompt) > chars else prompt, 0)


def keep_prompt(prompt: str, shared: int, chars: int, other: str | None) -> Rewrite:
    return Rewrite(prompt, 0)


def cross_talk(prompt: str, shared: int, chars: int, other: str | None) -> Rewrite:
    if other is None:
        return Rewrite(prompt, 0)
    cut = min(chars or len(prompt) * 9 // 10, len(prompt), len(other))  # default: all but the question at the end
    return Rewrite(other[:cut] + prompt[cut:], 0)


def fail_on_hit(prompt: str, shared: int, chars: int, other: str | None) -> Rewrite:
    return Rewrite(prompt, 0, fail_status=500 if shared >= MIN_SHARED_CHARS else None)


@dataclass(frozen=True)
class Fault:
    # (prompt, shared prefix chars, chars, another prompt in flight or None) -> Rewrite
    rewrite: Callable[[str, int, int, str | None], Rewrite]
    default_chars: int
    cache_only: bool  # True: only requests served with the cache on are touched
    request_fields: dict = field(default_factory=dict)  # set on every forwarded request


FAULTS: dict[str, Fault] = {
    "lost-prefix": Fault(lost_prefix, 0, cache_only=True),
    "corrupt-cached-suffix": Fault(corrupt_cached_suffix, 200, cache_only=True),
    "truncate-prompt": Fault(truncate_prompt, 2000, cache_only=False),
    "no-cache": Fault(keep_prompt, 0, cache_only=False, request_fields={"cache_prompt": False}),
    "fail-on-hit": Fault(fail_on_hit, 0, cache_only=True),
    "cross-talk": Fault(cross_talk, 0, cache_only=False),
    "none": Fault(keep_prompt, 0, cache_only=False),
}


class PromptMemory:
    """Prompts a prefix cache would hold: those served with the cache on, since the last flush."""

    def __init__(self, capacity: int = 512):
        self.prompts: deque[str] = deque(maxlen=capacity)

    def longest_shared(self, prompt: str) -> int:
        return max((len(os.path.commonprefix([prompt, seen])) for seen in self.prompts), default=0)

    def add(self, prompt: str) -> None:
        self.prompts.append(prompt)

    def clear(self) -> None:
        self.prompts.clear()
