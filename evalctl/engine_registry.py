"""The engine registry: engine name -> adapter class, filled by `@register_engine` in `servers.engines`.

Modules of `evalctl.servers.engines` are imported on the first lookup (not at import of this
module), so `config` can validate engine names and settings without importing every engine,
and an engine added as one module there is known everywhere: config, CLI, `servers show`, runs.
It lives beside `config`, not in `servers`: config validates against it and every server module
reads config, so inside `servers` it would make config and servers import each other.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import TYPE_CHECKING, TypeVar

from evalctl.errors import BadInput

if TYPE_CHECKING:
    from evalctl.servers.base import EngineAdapter

_ENGINES: dict[str, type[EngineAdapter]] = {}
_discovered = False
A = TypeVar("A", bound="type[EngineAdapter]")


class UnknownEngine(BadInput):
    """An engine name nobody registered; the message lists the known ones (a ValueError too, so config validation locates it)."""


def register_engine(name: str):
    """Class decorator: register an EngineAdapter subclass under `name` (also set as its `name`)."""

    def add(cls: A) -> A:
        if name in _ENGINES and _ENGINES[name] is not cls:
            raise RuntimeError(f"engine {name!r} is registered twice ({_ENGINES[name].__module__} and {cls.__module__})")
        cls.name = name
        _ENGINES[name] = cls
        return cls

    return add


def _discover() -> None:
    global _discovered
    if _discovered:
        return
    _discovered = True
    package = importlib.import_module("evalctl.servers.engines")
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")


def engine_names() -> list[str]:
    _discover()
    return sorted(_ENGINES)


def engine_class(name: str) -> type[EngineAdapter]:
    _discover()
    try:
        return _ENGINES[name]
    except KeyError:
        raise UnknownEngine(f"unknown engine {name!r}; known: {', '.join(engine_names())}") from None


def adapter_for(name: str) -> EngineAdapter:
    return engine_class(name)()


def engines() -> list[type[EngineAdapter]]:
    """Every registered adapter class, by name."""
    return [engine_class(name) for name in engine_names()]
