"""The engine registry: engine name -> adapter class, filled by `@register_engine` (an `evalctl.registry.Registry`).

The built-in engines' modules are imported on the first lookup (not at import of this module).
An engine outside evalctl is a plug-in module (`evalctl.plugins`: an entry point or
`EVALCTL_PLUGINS`). The schema validates engine names and settings through the lookup this
module installs in it (`schema.use_engines`): the schema imports no registry, since every engine
imports the schema.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from evalctl.registry import Registry
from evalctl.schema import use_engines

if TYPE_CHECKING:
    from evalctl.servers.base import EngineAdapter

ENGINES: Registry[type[EngineAdapter]] = Registry(
    "engine",
    (
        "evalctl.servers.engines.external:ExternalAdapter",
        "evalctl.servers.engines.llamacpp:LlamaCppAdapter",
        "evalctl.servers.engines.sglang:SGLangAdapter",
        "evalctl.servers.engines.vllm:VLLMAdapter",
    ),
    key=lambda adapter: adapter.name,
)
A = TypeVar("A", bound="type[EngineAdapter]")


def register_engine(name: str):
    """Class decorator for a plug-in: register an EngineAdapter subclass under `name` (also set as its `name`).

    evalctl's own engines set `name` and are listed in `ENGINES` instead."""

    def add(cls: A) -> A:
        cls.name = name
        ENGINES.register(name, cls)
        return cls

    return add


def engine_names() -> list[str]:
    return ENGINES.names()


def engine_class(name: str) -> type[EngineAdapter]:
    return ENGINES.get(name)


def adapter_for(name: str) -> EngineAdapter:
    return engine_class(name)()


def engines() -> list[type[EngineAdapter]]:
    """Every registered adapter class, by name."""
    return list(ENGINES.items().values())


use_engines(engine_class)  # the schema validates engine names and settings through this registry
