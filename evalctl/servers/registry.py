"""The engine registry: engine name -> adapter class, the built-ins imported on the first lookup; a plug-in engine
is an `evalctl.engines` entry point naming its adapter class. It hands the schema (a leaf that names no engine) the
union of every engine's `Settings` that a profile's `engine:` is validated by (`EngineSettings.union`).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Annotated, Literal, Union

from pydantic import Field, TypeAdapter

from evalctl.registry import Registry
from evalctl.schema import EngineSettings

if TYPE_CHECKING:
    from evalctl.servers.base import EngineAdapter

ENGINES: Registry[type[EngineAdapter]] = Registry(
    "engine",
    (
        "evalctl.servers.engines.llamacpp:LlamaCppAdapter",
        "evalctl.servers.engines.sglang:SGLangAdapter",
        "evalctl.servers.engines.vllm:VLLMAdapter",
    ),
    key=lambda adapter: adapter.name,
)


def adapter_for(name: str) -> EngineAdapter:
    return ENGINES.get(name)()


def engines() -> list[type[EngineAdapter]]:
    """Every registered adapter class, by name."""
    return list(ENGINES.items().values())


def engine_settings() -> TypeAdapter[EngineSettings]:
    """Every registered engine's `Settings` as one union, discriminated by their literal `name` (plug-ins loaded first)."""
    return _settings_union(tuple(engines()))


@functools.cache
def _settings_union(adapters: tuple[type[EngineAdapter], ...]) -> TypeAdapter[EngineSettings]:
    for adapter in adapters:
        if adapter.Settings.model_fields["name"].annotation != Literal[adapter.name]:
            raise TypeError(f"engine {adapter.name!r}: its Settings must say `name: Literal[{adapter.name!r}] = {adapter.name!r}`")
    return TypeAdapter(Annotated[Union[tuple(adapter.Settings for adapter in adapters)], Field(discriminator="name")])  # noqa: UP007


EngineSettings.union = engine_settings
