"""For the faulty builds' sitecustomize modules (test aids): patch a module of an engine right after the engine imports it.

Importing the engine from sitecustomize would slow every Python process of the server (and its
pip); a finder on sys.meta_path waits for the one import that matters instead.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType


class _PatchOnImport(importlib.abc.MetaPathFinder):
    def __init__(self, target: str, patch: Callable[[ModuleType], None]):
        self.target = target
        self.patch = patch

    def find_spec(self, name, path, target=None):
        if name != self.target:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            self.patch(module)

        spec.loader.exec_module = exec_and_patch
        return spec


def patch_on_import(target: str, patch: Callable[[ModuleType], None]) -> None:
    """Run `patch(module)` once `target` is imported, before anyone else sees the module."""
    sys.meta_path.insert(0, _PatchOnImport(target, patch))
