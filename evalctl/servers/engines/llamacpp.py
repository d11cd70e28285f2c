"""llama.cpp on CPU through xllamacpp: the engine tests and laptops can run."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
from pathlib import Path
from types import ModuleType
from typing import Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, model_validator

from evalctl.extras import require
from evalctl.manifest import CACHED_TOKENS
from evalctl.schema import CacheMode, EngineSettings, ServerProfile, Variant
from evalctl.servers import llamacpp_main
from evalctl.servers.base import EngineAdapter, LaunchRecord, flat_settings, interpreter
from evalctl.servers.bundled import resolve_model_path

# Run by its file: it needs only the standard library and xllamacpp, so an engine venv without evalctl serves.
LAUNCHER = Path(llamacpp_main.__file__).resolve()
# The launcher's record of the build it imported and the settings that build lacks (servers.llamacpp_main).
RECORD_FILE = "launcher.json"
# /props keys that change on every start, or repeat what the launch said, not what it resolved.
_PROPS_SKIP = ("media_marker", "ui_settings", "webui_settings")


def _xllamacpp() -> ModuleType | None:
    """xllamacpp if installed: a llama.cpp server at a --url may run where evalctl's cpu extra is not."""
    return importlib.import_module("xllamacpp") if importlib.util.find_spec("xllamacpp") else None


class Speculation(BaseModel):
    """Speculative decoding on a llama.cpp server: a serving feature to cross with the cache (one profile per arm).

    Its tuning fields are CommonParams fields under `speculative.` (`extra_args: [--param, speculative.draft.n_max=8]`)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["ngram-simple", "ngram-map-k", "ngram-mod", "ngram-cache", "draft"] = Field(
        description="Drafts from n-grams of the context so far, or (draft) from a small draft model."
    )
    draft_model: str | None = Field(None, description="The draft model's GGUF (kind draft): a path or bundled:NAME.")

    @model_validator(mode="after")
    def _draft_model_with_draft(self) -> Speculation:
        if (self.kind == "draft") != (self.draft_model is not None):
            raise ValueError("speculative: kind draft needs draft_model, and only it takes one")
        return self

    def argv(self) -> list[str]:
        """The launcher's flags: the kind as the name after xllamacpp's COMMON_SPECULATIVE_TYPE_ prefix (lower case)."""
        kind = "draft_simple" if self.kind == "draft" else self.kind.replace("-", "_")
        return ["--speculative", kind, *(["--draft-model", resolve_model_path(self.draft_model)] if self.draft_model else [])]


class LlamaCppSettings(EngineSettings):
    name: Literal["llamacpp"] = "llamacpp"
    context_length: int = Field(8192, gt=0, description="Context per request slot.")
    parallel: int = Field(4, ge=1, description="Concurrent request slots; default: 4, or a concurrency sweep's highest level.")
    threads: int | None = Field(None, ge=1, description="CPU threads; default: all cores.")
    speculative: Speculation | None = Field(None, description="Speculative decoding (a launch setting of the server); default: none.")
    cache_ram_mib: int | None = Field(
        0,
        ge=0,
        description="The cache-on server's host-RAM prompt cache (MiB), which refills erased slots: 0 off, so a flush means"
        " cold; null: the build's default (8192 in 2026 releases), as users serve (workload hunt's warm arm).",
    )

    def with_slots(self, requests: int) -> LlamaCppSettings:
        return self if "parallel" in self.model_fields_set else self.model_copy(update={"parallel": max(self.parallel, requests)})


class LlamaCppAdapter(EngineAdapter):
    name = "llamacpp"  # listed in servers.registry.ENGINES
    Settings = LlamaCppSettings
    detect_routes = (("/props", lambda body: "default_generation_settings" in body),)
    detect_rank = 10
    cached_tokens_if_missing = 0

    metrics = {
        "llamacpp:prompt_tokens_total": "prompt_tokens_evaluated",  # cache hits excluded
        "llamacpp:prompt_tokens_cached_total": CACHED_TOKENS,
        "llamacpp:tokens_predicted_total": "tokens_predicted",
    }

    def cores(self, profile: ServerProfile) -> int | None:
        return getattr(profile.engine, "threads", None)

    def preflight(self, profile: ServerProfile, variant: Variant) -> None:
        if interpreter(profile, variant) is None:  # evalctl's own interpreter serves: its xllamacpp must be there
            require("xllamacpp", "the llama.cpp CPU engine")
        resolve_model_path(profile.model_path)

    def engine_argv(self, python: str, profile: ServerProfile, cache: CacheMode, port: int | str, workdir: str) -> list[str]:
        settings: LlamaCppSettings = profile.engine
        return [
            python, str(LAUNCHER),
            "--model", resolve_model_path(profile.model_path),
            "--host", profile.host,
            "--port", str(port),
            "--ctx-per-slot", str(settings.context_length),
            "--parallel", str(settings.parallel),
            "--threads", str(settings.threads or os.cpu_count() or 1),
            "--cache", cache.value,
            *(["--cache-ram-mib", str(settings.cache_ram_mib)] if settings.cache_ram_mib is not None else []),
            "--slot-save-path", workdir,
            "--record", str(Path(workdir) / RECORD_FILE),
            *(settings.speculative.argv() if settings.speculative else []),
        ]  # fmt: skip

    def launch_record(self, workdir: Path) -> LaunchRecord:
        # The launcher's own word on the build: the venv it ran in may hold another xllamacpp than evalctl's.
        try:
            data = json.loads((workdir / RECORD_FILE).read_text())
        except (OSError, ValueError):
            return LaunchRecord()  # a launcher of an older evalctl, or another command in its place
        return LaunchRecord(
            info={"version": data.get("version"), "llama_cpp_build": data.get("llama_cpp_build"), "renamed_settings": data.get("renamed")},
            unset_settings=data.get("unset") or {},
        )

    def request_fields(self, cache: CacheMode) -> dict:
        return {"cache_prompt": cache is CacheMode.on}

    def prewarm_fields(self, profile: ServerProfile) -> list[dict]:
        # Each llama.cpp slot keeps its own prompt cache: seed every slot (a server at a URL: as many as launched by default).
        own = profile.engine if isinstance(profile.engine, LlamaCppSettings) else LlamaCppSettings()
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
