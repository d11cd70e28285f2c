"""SGLang: `python -m sglang.launch_server`, radix prefix cache on or off.

Flags checked against SGLang 0.5.23's own parser (tests/servers/test_engine_parsers.py).
"""

from __future__ import annotations

import httpx

from evalctl.manifest import CACHED_TOKENS
from evalctl.schema import CacheMode, ServerProfile
from evalctl.servers.base import EngineAdapter, GpuEngineSettings, flat_settings, optional_flags

# /server_info is every resolved server argument (backends, Mamba strategy, ...) plus live state that
# changes with each request: the live parts are left out of the record.
_LIVE_KEYS = ("internal_states", "version", "status", "last_receive_tstamp")


def _sglang_server_info(body: dict) -> bool:
    # vLLM in dev mode also answers /server_info, with its `vllm_config`.
    return "vllm_config" not in body and "tp_size" in body


class SGLangAdapter(EngineAdapter):
    name = "sglang"  # listed in servers.registry.ENGINES
    Settings = GpuEngineSettings
    detect_routes = (("/server_info", _sglang_server_info), ("/get_server_info", _sglang_server_info))
    detect_rank = 20  # before vLLM, whose dev-mode /server_info would otherwise be asked second
    # Readiness means a token was generated, not just that the HTTP server is up.
    health_path = "/health_generate"
    # --enable-cache-report adds prompt_tokens_details.cached_tokens only when it is > 0.
    cached_tokens_if_missing = 0
    metrics = {
        "sglang:cache_hit_rate": "cache_hit_rate",
        "sglang:cached_tokens_total": CACHED_TOKENS,
        "sglang:prompt_tokens_total": "prompt_tokens",
        "sglang:generation_tokens_total": "generation_tokens",
    }

    def engine_argv(self, python: str, profile: ServerProfile, cache: CacheMode, port: int | str, workdir: str) -> list[str]:
        settings = self.settings(profile)
        return [
            python, "-m", "sglang.launch_server",
            "--model-path", profile.model_path,
            "--host", profile.host,
            "--port", str(port),
            "--tp-size", str(settings.tp),
            *optional_flags({
                "--dtype": settings.dtype,
                "--quantization": settings.quantization,
                "--random-seed": settings.random_seed,
                "--chunked-prefill-size": settings.chunked_prefill_size,
                "--mem-fraction-static": settings.mem_fraction_static,
                "--max-running-requests": settings.max_running_requests,
            }),
            "--enable-cache-report",  # how cached tokens are measured per request
            "--enable-metrics",
            *settings.mamba_flags(),
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
        if profile is not None and profile.settings.chunked_prefill_size:
            return profile.settings.chunked_prefill_size
        size = self.server_info(http)["settings"].get("chunked_prefill_size")
        return int(size) if size else None
