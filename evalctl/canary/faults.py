"""Named faults: how the canary rewrites a prompt before the real server sees it. Pure functions.

Each imitates a silent serving bug (no error, plausible usage); docs/probe-and-canary.md says what each does and which
check catches it. `lost-prefix` is the SGLang Mamba bug that motivated evalctl (a cached prefix forgotten);
`corrupt-cached-suffix`, stale state at the end of the cached blocks; `cross-talk`, a llama.cpp server that answered
one client from another's system prompt; `none`, the healthy control (e.g. a good build in a bisect test).
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


class PromptMemory(deque):
    """Prompts a prefix cache would hold: those served with the cache on, since the last flush (the newest `capacity`)."""

    add = deque.append

    def __init__(self, capacity: int = 512):
        super().__init__(maxlen=capacity)

    def longest_shared(self, prompt: str) -> int:
        return max((len(os.path.commonprefix([prompt, seen])) for seen in self), default=0)
