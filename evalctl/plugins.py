"""Where registries find code that is not part of evalctl: plug-in modules, imported once.

A plug-in is one Python module that registers what it adds (an engine, a task, a gate check)
when imported. It is found by either
- the `evalctl.plugins` entry-point group of an installed distribution (a package's
  `[project.entry-points."evalctl.plugins"]`), or
- `EVALCTL_PLUGINS`: comma-separated module names importable from `sys.path` (a folder of
  one's own on PYTHONPATH), for code that is not packaged.
Every `evalctl.registry.Registry` look-up asks for them (each module is imported once, whichever
registry asks first), so adding one needs no edit to evalctl.
"""

from __future__ import annotations

import functools
import importlib
import os
from importlib.metadata import EntryPoint, entry_points

from evalctl.errors import BadInput

PLUGINS_ENV = "EVALCTL_PLUGINS"
ENTRY_POINT_GROUP = "evalctl.plugins"
_loaded: set[str] = set()


def load_plugins() -> list[str]:
    """Import every plug-in module not yet imported; their names (a bad one is a BadInput)."""
    names = [n.strip() for n in os.environ.get(PLUGINS_ENV, "").split(",") if n.strip()]
    found = [(name, None) for name in names] + [(ep.value, ep) for ep in _entry_points()]
    for name, entry in found:
        if name in _loaded:
            continue
        try:
            entry.load() if entry is not None else importlib.import_module(name)
        except ImportError as exc:
            raise BadInput(f"cannot import evalctl plug-in {name!r} ({PLUGINS_ENV} or entry point {ENTRY_POINT_GROUP}): {exc}") from exc
        _loaded.add(name)
    return sorted(_loaded)


@functools.cache
def _entry_points() -> tuple[EntryPoint, ...]:
    # Installed distributions do not change while evalctl runs; the environment variable may (tests).
    return tuple(entry_points(group=ENTRY_POINT_GROUP))
