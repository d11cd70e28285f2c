"""Every committed script still imports: the names it takes from evalctl exist (a rename elsewhere broke one unseen)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


@pytest.mark.parametrize("path", sorted(SCRIPTS.glob("*.py")), ids=lambda p: p.name)
def test_a_script_imports_without_running(path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(SCRIPTS))  # scripts import their siblings (bench_bisect: bench_sequential)
    name = f"evalctl_script_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)  # each script runs only under `if __name__ == "__main__"`
    assert callable(getattr(module, "main", None)), f"{path.name} has no main()"
