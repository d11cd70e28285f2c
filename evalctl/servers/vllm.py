"""vLLM: `vllm serve MODEL` (as `python -m vllm.entrypoints.cli.main serve`, so a variant's venv picks the build)."""

from __future__ import annotations

import re

import httpx

from evalctl.config import CacheMode, ServerProfile
from evalctl.servers.base import EngineAdapter, flat_settings, mamba_flags, optional_flags

# `key=value` items of the resolved VllmConfig's text form (/server_info), nested configs left whole.
_CONFIG_ITEM = re.compile(r"(\w+)=((?:[^,()\[\]{}]|\([^()]*\)|\[[^\[\]]*\]|\{[^{}]*\})*)")


class VLLMAdapter(EngineAdapter):
    name = "vllm"
    metrics = {
        "vllm:prefix_cache_queries_total": "prefix_cache_queries",
        "vllm:prefix_cache_hits_total": "prefix_cache_hits",
        "vllm:prompt_tokens_total": "prompt_tokens",
        "vllm:generation_tokens_total": "generation_tokens",
    }

    def engine_argv(self, python: str, profile: ServerProfile, cache: CacheMode, port: int | str, workdir: str) -> list[str]:
        return [
            python, "-m", "vllm.entrypoints.cli.main", "serve", profile.model_path,
            "--host", profile.host,
            "--port", str(port),
            "--tensor-parallel-size", str(profile.tp),
            *optional_flags({
                "--dtype": profile.dtype,
                "--quantization": profile.quantization,
                "--seed": profile.random_seed,
                "--max-num-batched-tokens": profile.chunked_prefill_size,
                "--gpu-memory-utilization": profile.mem_fraction_static,
                "--max-num-seqs": profile.max_running_requests,
            }),
            "--enable-prompt-tokens-details",  # usage.prompt_tokens_details.cached_tokens
            "--enable-prefix-caching" if cache is CacheMode.on else "--no-enable-prefix-caching",
            *mamba_flags(profile),
        ]  # fmt: skip

    def engine_env(self, profile: ServerProfile) -> dict[str, str]:
        # /reset_prefix_cache (and /server_info) are only mounted in dev mode.
        return {"VLLM_SERVER_DEV_MODE": "1", **({"VLLM_BATCH_INVARIANT": "1"} if profile.deterministic else {})}

    def flush(self, http: httpx.Client) -> bool:
        http.post("/reset_prefix_cache").raise_for_status()
        return True

    def server_info(self, http: httpx.Client) -> dict:
        version = http.get("/version")
        version.raise_for_status()
        info: dict = {"engine": "vllm", "version": version.json().get("version")}
        # /server_info (dev mode, which evalctl turns on) holds the config vLLM resolved at start-up.
        response = http.get("/server_info")
        if response.status_code == 200:
            config = response.json().get("vllm_config")
            items = dict(_CONFIG_ITEM.findall(config)) if isinstance(config, str) else config
            info["settings"] = flat_settings(items if isinstance(items, dict) else {})
        return info
