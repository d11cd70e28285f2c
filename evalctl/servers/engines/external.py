"""A server the user started: evalctl only talks to it."""

from __future__ import annotations

import httpx

from evalctl.schema import EXTERNAL, CacheMode, ServerProfile
from evalctl.servers.base import EngineAdapter


class ExternalAdapter(EngineAdapter):
    name = EXTERNAL  # listed in servers.registry.ENGINES
    launches = False
    # Unknown engine: a missing field means "not reported", not zero.
    cached_tokens_if_missing = None

    def engine_argv(self, python: str, profile: ServerProfile, cache: CacheMode, port: int | str, workdir: str) -> None:
        return None

    def server_info(self, http: httpx.Client) -> dict:
        try:
            models = http.get("/v1/models").json()
            return {"models": [m.get("id") for m in models.get("data", [])]}
        except (httpx.HTTPError, ValueError, AttributeError):
            return {}
