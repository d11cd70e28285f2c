"""SGLang: `python -m sglang.launch_server`, radix prefix cache on or off.

Flags checked against SGLang 0.5.23's own parser (tests/servers/test_engine_parsers.py).
"""

from __future__ import annotations

import httpx

from evalctl.config import CacheMode, ServerProfile
from evalctl.servers.base import EngineAdapter, flat_settings, mamba_flags, optional_flags

# /server_info is every resolved server argument (backends, Mamba strategy, ...) plus live state that
# changes with each request: the live parts are left out of the record.
_LIVE_KEYS = ("internal_states", "version", "status", "last_receive_tstamp")


class SGLangAdapter(EngineAdapter):
    name = "sglang"
    # Readiness means a token was generated, not just that the HTTP server is up.
    health_path = "/health_generate"
    # --enable-cache-report adds prompt_tokens_details.cached_tokens only when it is > 0.
    cached_tokens_if_missing = 0
    metrics = {
        "sglang:cache_hit_rate": "cache_hit_rate",
        "sglang:cached_tokens_total": "cached_tokens",
        "sglang:prompt_tokens_total": "prompt_tokens",
        "sglang:generation_tokens_total": "generation_tokens",
    }

    def engine_argv(self, python: str, profile: ServerProfile, cache: CacheMode, port: int | str, workdir: str) -> list[str]:
        return [
            python, "-m", "sglang.launch_server",
            "--model-path", profile.model_path,
            "--host", profile.host,
            "--port", str(port),
            "--tp-size", str(profile.tp),
            *optional_flags({
                "--dtype": profile.dtype,
                "--quantization": profile.quantization,
                "--random-seed": profile.random_seed,
                "--chunked-prefill-size": profile.chunked_prefill_size,
                "--mem-fraction-static": profile.mem_fraction_static,
                "--max-running-requests": profile.max_running_requests,
            }),
            "--enable-cache-report",  # how cached tokens are measured per request
            "--enable-metrics",
            *mamba_flags(profile),
            *(["--disable-radix-cache"] if cache is CacheMode.off else []),
            *(["--enable-deterministic-inference"] if profile.deterministic else []),
        ]  # fmt: skip

    def flush(self, http: httpx.Client) -> bool:
        # SGLang answers 400 (and does nothing) while requests are running.
        http.post("/flush_cache").raise_for_status()
        return True

    def server_info(self, http: httpx.Client) -> dict:
        response = http.get("/server_info")
        if response.status_code == 404:  # releases before the rename
            response = http.get("/get_server_info")
        response.raise_for_status()
        info = response.json()
        return {"engine": "sglang", "version": info.get("version"), "settings": flat_settings(info, _LIVE_KEYS)}

    def prefill_chunk_tokens(self, http: httpx.Client, profile: ServerProfile | None) -> int | None:
        # The profile's setting when pinned; else what the server resolved (SGLang picks it by GPU memory).
        if profile is not None and profile.chunked_prefill_size:
            return profile.chunked_prefill_size
        size = self.server_info(http)["settings"].get("chunked_prefill_size")
        return int(size) if size else None
