"""The one registry: a name -> T mapping (engines, tasks, gate checks, workloads), and the one way plug-ins are found.

evalctl's own entries (`builtins`) are `"module:attribute"` references (to an entry, or a tuple of one module's),
imported on the first look-up: importing a registry stays cheap, and no module defining entries imports its registry.
A plug-in is an entry point in the group `evalctl.<kind>s`: `[project.entry-points."evalctl.engines"] my-engine =
"my_module:MyAdapter"`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from typing import Generic, TypeVar

from evalctl.errors import BadInput, EvalctlError

T = TypeVar("T")


class Registry(Generic[T]):
    """`kind` names the entries in errors ("unknown engine 'x'; known: ...") and plug-ins' entry-point group; `builtins`
    are `"module:attribute"` references; `key` gives an entry's name."""

    def __init__(self, kind: str, builtins: Sequence[str], key: Callable[[T], str]) -> None:
        self.kind = kind
        self.group = f"evalctl.{kind}s"
        self.builtins = tuple(builtins)
        self.key = key
        self._items: dict[str, T] = {}
        self._complete = False

    def _add(self, found: T | tuple[T, ...]) -> None:
        # A different item under a taken name is a mistake, not an override.
        for item in found if isinstance(found, tuple) else (found,):
            name, known = self.key(item), self._items.get(self.key(item))
            if known is not None and known != item:
                raise EvalctlError(f"{self.kind} {name!r} is registered twice ({_origin(known)} and {_origin(item)})")
            self._items[name] = item

    def _load(self) -> None:
        if self._complete:
            return
        self._complete = True
        for ref in self.builtins:
            module, _, attribute = ref.partition(":")
            self._add(getattr(importlib.import_module(module), attribute))
        for entry in entry_points(group=self.group):
            try:
                self._add(entry.load())
            except (ImportError, AttributeError) as exc:
                raise BadInput(
                    f"cannot load evalctl plug-in {entry.name} = {entry.value!r} (entry point group {self.group}): {exc}"
                ) from exc

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
        """Bad input for the names in `names` that no entry has."""
        unknown = sorted(set(names) - set(self.items()))
        if unknown:
            raise unknown_name(self.kind, unknown, self.names(), where)


def unknown_name(kind: str, names: Sequence[str], known: Sequence[str], where: str = "") -> BadInput:
    """The error for names no registry holds, listing the known ones; `where` follows the names (" in my_tasks/")."""
    which = f"unknown {kind} {names[0]!r}" if len(names) == 1 else f"unknown {kind}s {', '.join(map(repr, names))}"
    return BadInput(f"{which}{where}; known: {', '.join(known) or '(none)'}")


def _origin(item: object) -> str:
    return getattr(item, "__module__", None) or type(item).__module__
