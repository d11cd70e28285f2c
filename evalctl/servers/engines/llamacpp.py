"""llama.cpp on CPU through xllamacpp: the engine tests and laptops can run."""

from __future__ import annotations

import importlib
import importlib.util
import os
from types import ModuleType

import httpx
from pydantic import Field

from evalctl.extras import require
from evalctl.manifest import CACHED_TOKENS
from evalctl.schema import CacheMode, EngineSettings, ServerProfile, Variant
from evalctl.servers.base import EngineAdapter, flat_settings
from evalctl.servers.bundled import resolve_model_path

# /props keys that change on every start, or repeat what the launch said, not what it resolved.
_PROPS_SKIP = ("media_marker", "ui_settings", "webui_settings")


def _xllamacpp() -> ModuleType | None:
    """xllamacpp if installed: a llama.cpp server at a --url may run where evalctl's cpu extra is not."""
    return importlib.import_module("xllamacpp") if importlib.util.find_spec("xllamacpp") else None


class LlamaCppSettings(EngineSettings):
    context_length: int = Field(8192, gt=0, description="Context per request slot.")
    parallel: int = Field(4, ge=1, description="Concurrent request slots.")
    threads: int | None = Field(None, ge=1, description="CPU threads; default: all cores.")


def _props_say_llamacpp(body: dict) -> bool:
    return "default_generation_settings" in body


class LlamaCppAdapter(EngineAdapter):
    name = "llamacpp"  # listed in servers.registry.ENGINES
    Settings = LlamaCppSettings
    detect_routes = (("/props", _props_say_llamacpp),)
    detect_rank = 10

    metrics = {
        "llamacpp:prompt_tokens_total": "prompt_tokens_evaluated",  # cache hits excluded
        "llamacpp:prompt_tokens_cached_total": CACHED_TOKENS,
        "llamacpp:tokens_predicted_total": "tokens_predicted",
    }

    def preflight(self, profile: ServerProfile, variant: Variant) -> None:
        require("xllamacpp", "the llama.cpp CPU engine")
        resolve_model_path(profile.model_path)

    def engine_argv(self, python: str, profile: ServerProfile, cache: CacheMode, port: int | str, workdir: str) -> list[str]:
        settings = self.settings(profile)
        return [
            python, "-m", "evalctl.servers.llamacpp_main",
            "--model", resolve_model_path(profile.model_path),
            "--host", profile.host,
            "--port", str(port),
            "--ctx-per-slot", str(settings.context_length),
            "--parallel", str(settings.parallel),
            "--threads", str(settings.threads or os.cpu_count() or 1),
            "--cache", cache.value,
            "--slot-save-path", workdir,
        ]  # fmt: skip

    def request_fields(self, cache: CacheMode) -> dict:
        return {"cache_prompt": cache is CacheMode.on}

    def prewarm_fields(self, profile: ServerProfile) -> list[dict]:
        # Each llama.cpp slot keeps its own prompt cache: seed every slot (a server at a URL: as many as launched by default).
        own = profile.settings if isinstance(profile.settings, LlamaCppSettings) else LlamaCppSettings()
        return [{"id_slot": slot} for slot in range(own.parallel)]

    def flush(self, http: httpx.Client) -> bool:
        slots = http.get("/slots").json()
        for slot in slots:
            http.post(f"/slots/{slot['id']}", params={"action": "erase"}).raise_for_status()
        return True

    def server_info(self, http: httpx.Client) -> dict:
        props = http.get("/props").json()
        xllamacpp = _xllamacpp()  # only for its version; the server runs in another process
        return {
            "engine": "llama.cpp (xllamacpp)" if xllamacpp else "llama.cpp",
            "version": getattr(xllamacpp, "__version__", "unknown"),
            "build_info": props.get("build_info"),
            "n_ctx": props.get("default_generation_settings", {}).get("n_ctx"),
            "total_slots": props.get("total_slots"),
            "settings": flat_settings(props, _PROPS_SKIP),
        }

    def prefill_chunk_tokens(self, http: httpx.Client, profile: ServerProfile | None) -> int | None:
        # A prompt is computed in micro-batches of n_ubatch tokens; /props does not report it,
        # so read it from the launch's `--param n_ubatch=N` or xllamacpp's default.
        for arg in profile.extra_args if profile else []:
            if arg.startswith("n_ubatch="):
                return int(arg.partition("=")[2])
        xllamacpp = _xllamacpp()
        return int(xllamacpp.CommonParams().n_ubatch) if xllamacpp else None
