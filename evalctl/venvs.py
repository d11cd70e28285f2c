"""Engine venvs made from pip requirements (a variant's `pip:`, e.g. `xllamacpp==2026.5.9294`), cached outside the clone.

As scripts/lib/venv-cache.sh, one folder per key (the requirements, the base interpreter, BUILDER_VERSION) under
$EVALCTL_VENV_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/evalctl/venvs. A venv is not relocatable, so it is built in place by
one builder at a time (`<folder>.lock`), its ready mark written last; a folder without it is removed and built again.
A spec pip cannot install is bad input (VenvBuildError) and leaves nothing. The venv has no pip (evalctl's installs into it).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from pydantic import BaseModel

from evalctl.errors import VenvBuildError

CACHE_ENV = "EVALCTL_VENV_CACHE"
READY_MARK = ".evalctl-ready"  # as scripts/lib/venv-cache.sh
RECORD = ".evalctl-venv.json"
# Part of the key: a change to how venvs are built here builds them anew.
BUILDER_VERSION = 1
# pip's last lines kept in the error of a spec it cannot install.
PIP_TAIL_LINES = 6


class PipVenv(BaseModel):
    """A ready venv for `requirements`: where it is and what pip resolved them to."""

    requirements: list[str]
    path: Path
    versions: dict[str, str]  # each requirement's distribution -> the installed version
    built_at: str
    build_seconds: float

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"


def venv_dir(requirements: Sequence[str]) -> Path:
    """The cache folder for these requirements (built or not): readable name, then a digest of the whole key."""
    root = os.environ.get(CACHE_ENV) or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "evalctl" / "venvs"
    key = json.dumps([list(requirements), sys.base_prefix, list(sys.version_info[:2]), BUILDER_VERSION])
    slug = re.sub(r"[^A-Za-z0-9.]+", "-", "-".join(requirements)).strip("-")[:60]
    return Path(root) / f"pip-{slug}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def python_of(requirements: Sequence[str]) -> Path:
    """The interpreter of the venv for `requirements` (made by `ensure`)."""
    return venv_dir(requirements) / "bin" / "python"


def ready(requirements: Sequence[str]) -> PipVenv | None:
    """The venv's record if it is ready, else None."""
    folder = venv_dir(requirements)
    if not (folder / READY_MARK).is_file():
        return None
    return PipVenv.model_validate_json((folder / RECORD).read_text())


def ensure(requirements: Sequence[str], note=lambda message: None) -> PipVenv:
    """The ready venv for `requirements`, built first if no one has; `note` hears of a build."""
    found = ready(requirements)
    if found is not None:
        return found
    folder = venv_dir(requirements)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{folder}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = ready(requirements)  # another builder finished while this one waited
        if found is not None:
            return found
        if folder.exists():
            note(f"removing a half-built venv: {folder}")
            shutil.rmtree(folder)
        note(f"making a venv for {' '.join(requirements)} (cached for later runs): {folder}")
        try:
            return _build(list(requirements), folder)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise


def _build(requirements: list[str], folder: Path) -> PipVenv:
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, capture_output=True)
    python = folder / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-input", "--disable-pip-version-check", "-q"]
    done = subprocess.run([*pip, *requirements], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("WARNING:")]
        raise VenvBuildError(f"pip cannot install {' '.join(requirements)}:\n" + "\n".join(said[-PIP_TAIL_LINES:]))
    record = PipVenv(
        requirements=requirements,
        path=folder,
        versions=_installed(python, requirements),
        built_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        build_seconds=round(time.monotonic() - started, 1),
    )
    (folder / RECORD).write_text(record.model_dump_json(indent=1))
    (folder / READY_MARK).write_text(record.built_at + "\n")  # last: only now is it taken as ready
    return record


def _installed(python: Path, requirements: list[str]) -> dict[str, str]:
    """The version pip installed of each requirement's distribution, as the venv's own interpreter reads it."""
    names = [canonicalize_name(Requirement(text).name) for text in requirements]  # valid: the schema checked them
    ask = "import importlib.metadata as m, json, sys; print(json.dumps({n: m.version(n) for n in sys.argv[1:]}))"
    done = subprocess.run([str(python), "-c", ask, *names], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)
