"""The code blocks of a guide in docs/: a guide's test runs what the guide shows, not a copy of it.
A guide's plug-in (its Python module and the entry points of its pyproject.toml) is installed as pip would."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import tomllib

DOCS = Path(__file__).resolve().parents[1] / "docs"


def guide_block(guide: str, language: str, index: int = 0) -> str:
    """The `index`-th fenced code block of docs/`guide` whose info string is `language` ("" for plain ones)."""
    blocks, current, info = [], None, ""
    for line in (DOCS / guide).read_text().splitlines():
        if line.startswith("```"):
            if current is None:
                current, info = [], line[3:].strip()
            else:
                if info == language:
                    blocks.append("\n".join(current) + "\n")
                current = None
        elif current is not None:
            current.append(line)
    return blocks[index]


def dist_info(site: Path, name: str, entry_points: dict[str, dict[str, str]]) -> Path:
    """What pip leaves in site-packages for distribution `name` with `entry_points` (group -> name -> "module:attribute")."""
    info = site / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    points = "".join(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in named.items()) for group, named in entry_points.items())
    (info / "entry_points.txt").write_text(points)
    return info


def installed(site: Path, guide: str) -> str:
    """The guide's plug-in installed into `site`: its module (the python block) and its pyproject's entry points; the module's name."""
    project = tomllib.loads(guide_block(guide, "toml"))
    (module,) = project["tool"]["setuptools"]["py-modules"]
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(guide_block(guide, "python"))
    dist_info(site, project["project"]["name"], project["project"]["entry-points"])
    return module


def plugged_in(monkeypatch: pytest.MonkeyPatch, site: Path, guide: str, registry) -> None:
    """The guide's plug-in installed into `site` on sys.path, `registry` emptied to load afresh; all restored afterwards."""
    module = installed(site, guide)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.setattr(registry, "_items", {})
    monkeypatch.setattr(registry, "_complete", False)
