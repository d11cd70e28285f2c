"""vLLM: `vllm serve MODEL` (as `python -m vllm.entrypoints.cli.main serve`, so a variant's venv picks the build)."""

from __future__ import annotations

import httpx

from evalctl.config import CacheMode, ServerProfile
from evalctl.servers.base import EngineAdapter, mamba_flags, optional_flags


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

    def engine_env(self) -> dict[str, str]:
        # /reset_prefix_cache (and /server_info) are only mounted in dev mode.
        return {"VLLM_SERVER_DEV_MODE": "1"}

    def flush(self, http: httpx.Client) -> bool:
        http.post("/reset_prefix_cache").raise_for_status()
        return True

    def server_info(self, http: httpx.Client) -> dict:
        version = http.get("/version")
        version.raise_for_status()
        return {"engine": "vllm", "version": version.json().get("version")}
