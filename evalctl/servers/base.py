"""What an engine must say about itself, and the launch description it produces."""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx

from evalctl.config import CacheMode, ServerProfile, Variant


@dataclass(frozen=True)
class LaunchSpec:
    """A server command line, ready to run: argv plus environment additions."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


class EngineAdapter:
    """Engine-specific facts; the process lifecycle lives in `servers.process`."""

    name = "base"
    health_path = "/health"
    # Engines that omit `cached_tokens` when it is zero report it as this.
    cached_tokens_if_missing: int | None = 0

    def launch_spec(self, profile: ServerProfile, variant: Variant, cache: CacheMode, port: int, workdir: str) -> LaunchSpec | None:
        """The command that starts this server; None when evalctl does not launch it."""
        raise NotImplementedError

    def request_fields(self, cache: CacheMode) -> dict:
        """Extra JSON fields for every completion request."""
        return {}

    def prewarm_fields(self, profile: ServerProfile) -> list[dict]:
        """One dict of extra fields per prewarm request needed to seed the cache."""
        return [{}]

    def flush(self, http: httpx.Client) -> bool:
        """Reset the prefix cache; False when the engine offers no way to."""
        return False

    def server_info(self, http: httpx.Client) -> dict:
        """Version and settings as the running server reports them."""
        return {}

    def prefill_chunk_tokens(self, http: httpx.Client, profile: ServerProfile | None) -> int | None:
        """Tokens the engine prefills in one step (its chunked-prefill size); None when unknown."""
        return None
