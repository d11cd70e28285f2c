"""Which engine serves a URL: each answers a route the others lack.

llama.cpp `/props` (its generation settings), SGLang `/server_info` (older builds
`/get_server_info`: its server arguments), vLLM `/version`. SGLang is asked before vLLM
because vLLM in dev mode also has a `/server_info` (holding `vllm_config`).
"""

from __future__ import annotations

from collections.abc import Callable

import httpx

from evalctl.config import Engine

_Test = Callable[[dict], bool]
ROUTES: list[tuple[Engine, str, _Test]] = [
    (Engine.llamacpp, "/props", lambda body: "default_generation_settings" in body),
    (Engine.sglang, "/server_info", lambda body: "vllm_config" not in body and "tp_size" in body),
    (Engine.sglang, "/get_server_info", lambda body: "tp_size" in body),
    (Engine.vllm, "/version", lambda body: "version" in body),
]


def detect_engine(http: httpx.Client) -> tuple[Engine, str | None]:
    """The engine behind `http`'s base URL and the route that told; (external, None) when none does."""
    for engine, route, test in ROUTES:
        try:
            response = http.get(route)
            body = response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            continue
        if isinstance(body, dict) and test(body):
            return engine, route
    return Engine.external, None
