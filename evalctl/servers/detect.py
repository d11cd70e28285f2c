"""Which engine serves a URL: the registered engines' `detect_routes`, asked in ascending `detect_rank`."""

from __future__ import annotations

import httpx

from evalctl.client import server_http
from evalctl.servers.registry import engines


def detect_engine(http: httpx.Client) -> tuple[str | None, str | None]:
    """The engine behind `http`'s base URL and the route that told; (None, None) when none does."""
    for adapter in sorted(engines(), key=lambda cls: (cls.detect_rank, cls.name)):
        for route, test in adapter.detect_routes:
            try:
                response = http.get(route)
                body = response.json() if response.status_code == 200 else None
            except (httpx.HTTPError, ValueError):
                continue
            if isinstance(body, dict) and test(body):
                return adapter.name, route
    return None, None


def url_engine(url: str, api_key: str | None = None) -> tuple[str | None, str | None]:
    """The engine serving `url` and the route that told, as `detect_engine` asks."""
    with server_http(url, api_key, 5.0) as http:
        return detect_engine(http)


def served_model(url: str, api_key: str | None = None) -> str:
    """The first model `url` serves (/v1/models), which requests must name: vLLM answers 404 to any other."""
    try:
        with server_http(url, api_key, 30.0) as http:
            return str(http.get("/v1/models").json()["data"][0]["id"])
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError):
        return "external"  # a server without the route (llama.cpp's takes any name)
