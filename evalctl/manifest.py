"""`manifest.json`: what a run was (config, servers, versions, host), written atomically.

A run split into parts that run at once (cluster jobs) keeps each part's state (its job,
node, servers, failures, status) in `jobs/<part>.json`, written only by that part, so no two
writers share a file; the aggregation step folds them into the manifest.
"""

from __future__ import annotations

import datetime as dt
import getpass
import json
import os
import platform
import socket
import subprocess
import uuid
from pathlib import Path

import evalctl

MANIFEST_FILE = "manifest.json"
PARTS_DIR = "jobs"


def new_run_id(model: str) -> str:
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{model}-{uuid.uuid4().hex[:6]}"


def git_revision(path: Path) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _user() -> str | None:
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name and no passwd entry (some containers)
        return None


def host_info() -> dict:
    return {
        "hostname": socket.gethostname(),
        "user": _user(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }


def evalctl_info() -> dict:
    return {"version": evalctl.__version__, "git_revision": git_revision(Path(evalctl.__file__).parent)}


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str))
    os.replace(tmp, path)


def write_manifest(run_dir: Path, manifest: dict) -> None:
    _write_json(run_dir / MANIFEST_FILE, manifest)


def write_part_state(run_dir: Path, part: str, state: dict) -> None:
    (run_dir / PARTS_DIR).mkdir(exist_ok=True)
    _write_json(run_dir / PARTS_DIR / f"{part}.json", state)


def read_part_state(run_dir: Path, part: str) -> dict:
    """A part's state; {} before the part first ran (or when its file is unreadable: the part rewrites it)."""
    try:
        return json.loads((run_dir / PARTS_DIR / f"{part}.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def read_manifest(run_dir: Path) -> dict:
    path = run_dir / MANIFEST_FILE
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{run_dir} has no {MANIFEST_FILE}: not a run folder") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is corrupt: {exc}") from None
