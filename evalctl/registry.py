"""The one registry: a name -> T mapping, filled by the modules that define the T's (engines, tasks, gate checks).

A registry is built with references to its built-ins, `"module:attribute"` (an entry, or a tuple
of entries); they are imported on its first look-up, not when the registry is defined, so the
registry's module stays cheap to import, and a built-in module need not import its registry
(the registry depends on the built-ins, never the other way: no import cycle).
Plug-ins (`evalctl.plugins`: entry points and `EVALCTL_PLUGINS`) are loaded at every look-up
through the one loader, which imports each plug-in module once. A name no module registered is
bad input (exit 4), its message listing the known names (`unknown_name`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from evalctl.errors import BadInput, EvalctlError

T = TypeVar("T")


class Registry(Generic[T]):
    """`kind` names the entries in errors ("unknown engine 'x'; known: ..."); `builtins` are
    `"module:attribute"` references; `key` gives a built-in entry's name."""

    def __init__(self, kind: str, builtins: Sequence[str], key: Callable[[T], str]) -> None:
        self.kind = kind
        self.builtins = tuple(builtins)
        self.key = key
        self._items: dict[str, T] = {}
        self._builtins_loaded = False

    def register(self, name: str, item: T) -> T:
        """Add `item` under `name`; a different item under a taken name is a mistake, not an override."""
        known = self._items.get(name)
        if known is not None and known != item:
            raise EvalctlError(f"{self.kind} {name!r} is registered twice ({_origin(known)} and {_origin(item)})")
        self._items[name] = item
        return item

    def _load(self) -> None:
        from evalctl.plugins import load_plugins

        if not self._builtins_loaded:
            self._builtins_loaded = True
            for ref in self.builtins:
                module, _, attribute = ref.partition(":")
                found = getattr(importlib.import_module(module), attribute)
                for item in found if isinstance(found, tuple) else (found,):
                    self.register(self.key(item), item)
        load_plugins()

    def items(self) -> dict[str, T]:
        """Every entry, by name (sorted)."""
        self._load()
        return dict(sorted(self._items.items()))

    def names(self) -> list[str]:
        return list(self.items())

    def find(self, name: str) -> T | None:
        """The entry of `name`, or None (for a caller with other places to look, as tasks of YAML)."""
        return self.items().get(name)

    def get(self, name: str) -> T:
        """The entry of `name`; bad input listing the known ones if there is none."""
        found = self.find(name)
        if found is None:
            raise unknown_name(self.kind, [name], self.names())
        return found

    def check(self, names: Sequence[str], where: str = "") -> None:
        """Bad input for the names in `names` that no module registered."""
        unknown = sorted(set(names) - set(self.items()))
        if unknown:
            raise unknown_name(self.kind, unknown, self.names(), where)


def unknown_name(kind: str, names: Sequence[str], known: Sequence[str], where: str = "") -> BadInput:
    """The error for names no registry holds, listing the known ones; `where` follows the names (" in my_tasks/")."""
    which = f"unknown {kind} {names[0]!r}" if len(names) == 1 else f"unknown {kind}s {', '.join(map(repr, names))}"
    return BadInput(f"{which}{where}; known: {', '.join(known) or '(none)'}")


def _origin(item: object) -> str:
    return getattr(item, "__module__", None) or type(item).__module__
