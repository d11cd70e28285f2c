"""Optional dependencies (pyproject's extras): imported lazily, and named when missing."""

from __future__ import annotations

import importlib.util

from evalctl.errors import ConfigError

# Module -> the extra that installs it.
EXTRA_OF = {"xllamacpp": "cpu", "gguf": "cpu", "submitit": "slurm", "guidellm": "guidellm"}


def require(module: str, purpose: str) -> None:
    """ConfigError naming the extra to install when `module` cannot be imported."""
    if importlib.util.find_spec(module) is None:
        extra = EXTRA_OF[module]
        raise ConfigError(
            f"{purpose} needs {module!r}, from evalctl's {extra!r} extra: pip install -e '.[{extra}]' in a checkout, "
            f"or pip install 'evalctl[{extra}]'"
        )
