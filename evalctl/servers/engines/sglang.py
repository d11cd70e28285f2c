"""SGLang (`python -m sglang.launch_server`) on GPUs, or on CPU: `device: cpu` is its CPU engine (the venv of
scripts/install-sglang-cpu.sh), which without Intel AMX serves dense models through native torch (docs/engines-sglang-cpu.md).
Flags checked by SGLang's own parser (tests/servers/test_engine_parsers.py: the CPU venv's 0.5.14 and 0.5.23 take them).
"""

from __future__ import annotations

from typing import Literal

import httpx
from pydantic import Field

from evalctl.manifest import CACHED_TOKENS
from evalctl.schema import CacheMode, ServerProfile
from evalctl.servers.base import GpuEngineAdapter, GpuEngineSettings, flat_settings, optional_flags
from evalctl.servers.bundled import BUNDLED_PREFIX

# /server_info is every resolved server argument (backends, Mamba strategy, ...) plus live state that
# changes with each request: the live parts are left out of the record.
_LIVE_KEYS = ("internal_states", "version", "status", "last_receive_tstamp")


def _sglang_server_info(body: dict) -> bool:
    # vLLM in dev mode also answers /server_info, with its `vllm_config`.
    return "vllm_config" not in body and "tp_size" in body


# How long a flush waits for running requests to end (within the callers' HTTP timeouts: 30 s and more).
_FLUSH_WAIT_S = 20.0


class SGLangSettings(GpuEngineSettings):
    FLAGS = {"tp": "--tp-size", "dtype": "--dtype", "quantization": "--quantization", "random_seed": "--random-seed",
             "chunked_prefill_size": "--chunked-prefill-size", "mem_fraction_static": "--mem-fraction-static",
             "max_running_requests": "--max-running-requests"}  # fmt: skip
    CPU_ONLY = ("max_total_tokens", "threads")
    name: Literal["sglang"] = "sglang"
    device: Literal["cuda", "cpu"] = Field(
        "cuda", description="cpu: SGLang's CPU engine (SGLANG_USE_CPU_ENGINE=1, no overlap schedule); takes no GPU from the sweep."
    )
    attention_backend: str | None = Field(None, description="--attention-backend; on device cpu the default is torch_native.")
    max_total_tokens: int | None = Field(
        None, gt=0, description="CPU only: --max-total-tokens, the KV pool in tokens (else sized from free RAM: many GB)."
    )
    threads: int | None = Field(None, ge=1, description="CPU only: OMP_NUM_THREADS of the server's processes.")

    def cpu_flags(self) -> list[str]:
        if self.device == "cuda":
            return optional_flags({"--attention-backend": self.attention_backend})
        return [
            "--device", "cpu",
            "--attention-backend", self.attention_backend or "torch_native",
            # The overlap scheduler runs a CUDA stream beside the forward pass; the CPU engine runs without it.
            "--disable-overlap-schedule",
            # Idle, the scheduler busy-polls a whole core; on CPU that core is the model's own.
            "--sleep-on-idle",
            *optional_flags({"--max-total-tokens": self.max_total_tokens}),
        ]  # fmt: skip


class SGLangAdapter(GpuEngineAdapter):
    name = "sglang"  # listed in servers.registry.ENGINES
    Settings = SGLangSettings
    detect_routes = (("/server_info", _sglang_server_info), ("/get_server_info", _sglang_server_info))
    detect_rank = 20  # before vLLM, whose dev-mode /server_info would otherwise be asked second
    # Readiness means a token was generated, not just that the HTTP server is up.
    health_path = "/health_generate"
    # SGLang derives its gRPC port as --port + 10000 and refuses to start when that passes 65535,
    # gRPC on or off: a free port from the OS's ephemeral range (up to 60999) can be too high.
    highest_port = 55535
    # --port + 1 is its distributed-init (`--nccl-port`) port: left to SGLang, it is an OS pick that
    # another socket can take before the scheduler binds it (EADDRINUSE in CI).
    ports_needed = 2
    # --enable-cache-report adds prompt_tokens_details.cached_tokens only when it is > 0.
    cached_tokens_if_missing = 0
    install_script = "scripts/install-sglang-cpu.sh"
    model_flag = "--model-path"
    metrics = {
        "sglang:cache_hit_rate": "cache_hit_rate",
        "sglang:cached_tokens_total": CACHED_TOKENS,
        "sglang:prompt_tokens_total": "prompt_tokens",
        "sglang:generation_tokens_total": "generation_tokens",
    }
    # Its metrics live in Prometheus multiprocess files: a labelled counter appears only once
    # incremented, so a fresh server's /metrics has no cached tokens before the first hit.
    counters_from_zero = ("sglang:cached_tokens_total",)

    def engine_argv(self, python: str, profile: ServerProfile, cache: CacheMode, port: int | str, workdir: str) -> list[str]:
        settings: SGLangSettings = profile.engine
        return [
            python, "-m", "sglang.launch_server",
            *self.model_args(profile),
            "--host", profile.host,
            "--port", str(port),
            "--nccl-port", str(port + 1) if isinstance(port, int) else f"$(({port.removeprefix('$')}+1))",
            *settings.flags(),
            "--enable-cache-report",  # how cached tokens are measured per request
            "--enable-metrics",
            *settings.cpu_flags(),
            *settings.mamba_flags(),
            *(["--disable-radix-cache"] if cache is CacheMode.off else []),
            *(["--enable-deterministic-inference"] if profile.deterministic else []),
        ]  # fmt: skip

    def engine_env(self, profile: ServerProfile) -> dict[str, str]:
        settings: SGLangSettings = profile.engine
        if settings.device == "cuda":
            return {}
        return {"SGLANG_USE_CPU_ENGINE": "1", **({"OMP_NUM_THREADS": str(settings.threads)} if settings.threads else {})}

    def request_model(self, model_path: str) -> str:
        # A request's `model` of the form `name:adapter` selects a LoRA adapter in SGLang, and its
        # --served-model-name refuses a colon: a bundled name is sent as `bundled-NAME`.
        return model_path.replace(":", "-", 1) if model_path.startswith(BUNDLED_PREFIX) else model_path

    def flush(self, http: httpx.Client) -> bool:
        # SGLang answers 400 (and does nothing) while requests are running, or waiting in its
        # queue: as the last requests of a cell may still be, a moment after their answers came
        # back. Asked with a timeout, it waits up to that long for idle, then flushes.
        http.post("/flush_cache", params={"timeout": _FLUSH_WAIT_S}).raise_for_status()
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
        # A server at a URL detected as SGLang has no settings of its own.
        pinned = getattr(profile.engine, "chunked_prefill_size", None) if profile is not None else None
        if pinned:
            return pinned
        size = self.server_info(http)["settings"].get("chunked_prefill_size")
        return int(size) if size else None
