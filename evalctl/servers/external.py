"""A server the user started: evalctl only talks to it."""

from __future__ import annotations

import httpx

from evalctl.config import CacheMode, ServerProfile, Variant
from evalctl.servers.base import EngineAdapter, LaunchSpec


class ExternalAdapter(EngineAdapter):
    name = "external"
    # Unknown engine: a missing field means "not reported", not zero.
    cached_tokens_if_missing = None

    def launch_spec(self, profile: ServerProfile, variant: Variant, cache: CacheMode, port: int, workdir: str) -> LaunchSpec | None:
        return None

    def server_info(self, http: httpx.Client) -> dict:
        try:
            models = http.get("/v1/models").json()
            return {"models": [m.get("id") for m in models.get("data", [])]}
        except (httpx.HTTPError, ValueError, AttributeError):
            return {}
