"""Inference servers: one module per engine, one lifecycle shared by all."""

from __future__ import annotations

from evalctl.config import ConfigError, Engine
from evalctl.servers.base import EngineAdapter
from evalctl.servers.external import ExternalAdapter
from evalctl.servers.llamacpp import LlamaCppAdapter
from evalctl.servers.sglang import SGLangAdapter
from evalctl.servers.vllm import VLLMAdapter

_ADAPTERS: dict[Engine, type[EngineAdapter]] = {
    Engine.llamacpp: LlamaCppAdapter,
    Engine.external: ExternalAdapter,
    Engine.sglang: SGLangAdapter,
    Engine.vllm: VLLMAdapter,
}


def adapter_for(engine: Engine) -> EngineAdapter:
    try:
        return _ADAPTERS[engine]()
    except KeyError:
        raise ConfigError(f"engine {engine.value!r} is not supported yet") from None
