"""Where model aliases and gate policies are found, and the one reader of evalctl's YAML files.

A name (`--model NAME`, a config's `gate_policy: NAME`) is searched in each folder of `EVALCTL_CONFIG_PATH`
(os.pathsep-separated), then in the packaged `evalctl.configs` (the repository's `configs/`, mapped by setup.py);
each holds `<alias>.yaml` for models, `gate/<policy>.yaml` for gate policies.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from evalctl.errors import BadInput

CONFIG_PATH_ENV = "EVALCTL_CONFIG_PATH"
PACKAGED = "packaged"
POLICY_FOLDER = "gate"


@dataclass(frozen=True)
class Found:
    """A named file and the folder it came from: a user folder's path, or PACKAGED."""

    name: str
    path: Path
    source: str
    shadows: tuple[str, ...] = ()  # later folders' files of the same name, unused


def packaged_dir() -> Path:
    """The model aliases and gate policies shipped with evalctl (package data, never the checkout's path)."""
    return Path(str(resources.files("evalctl.configs")))


def known(kind: str = "") -> dict[str, Found]:
    """Every name of a kind ("" for model aliases, POLICY_FOLDER for gate policies); the first folder wins."""
    user = [Path(p).expanduser() for p in os.environ.get(CONFIG_PATH_ENV, "").split(os.pathsep) if p.strip()]
    found: dict[str, Found] = {}
    for folder, source in [(folder, str(folder)) for folder in user] + [(packaged_dir(), PACKAGED)]:
        for path in sorted((folder / kind).glob("*.yaml")):
            first = found.get(path.stem)
            found[path.stem] = replace(first, shadows=(*first.shadows, source)) if first else Found(path.stem, path, source)
    return dict(sorted(found.items()))


def find(name: str, kind: str = "") -> Found | None:
    """The file `name` of a kind, searched in order; None when no folder has it."""
    return known(kind).get(name)


def policy_file(name: str | Path) -> Path:
    """The gate policy file `name` means (`--policy`, a config's `gate_policy`): an existing file as it
    is, else a policy name searched in order, else a path-like name (a folder or a .yaml suffix) as a
    path, whose reading then fails naming it. Any other name: BadInput, listing the known policies."""
    path = Path(name)
    if path.is_file():
        return path
    named = find(str(name), POLICY_FOLDER)
    if named is not None:
        return named.path
    if path.suffix in (".yaml", ".yml") or len(path.parts) > 1:
        return path
    raise BadInput(f"unknown gate policy {str(name)!r}; known: {', '.join(known(POLICY_FOLDER)) or '(none)'} (or a YAML file's path)")


def read_yaml(path: Path, what: str, error: type[BadInput] = BadInput, mapping: bool = True) -> Any:
    """The mapping in the YAML file `path`; `error` (naming it as `what`) when unreadable, invalid or not a mapping.
    An empty file is an empty mapping. With `mapping=False`, whatever the file holds, unchecked (None when empty)."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise error(f"invalid YAML in {what} {path}: {exc}") from None
    if not mapping:
        return data
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise error(f"{what} {path} must be a mapping at the top level")
    return data
