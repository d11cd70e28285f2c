"""`manifest.json`: what a run was (config, servers, versions, host), written atomically."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import socket
import subprocess
import uuid
from pathlib import Path

import evalctl

MANIFEST_FILE = "manifest.json"


def new_run_id(model: str) -> str:
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{model}-{uuid.uuid4().hex[:6]}"


def git_revision(path: Path) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def host_info() -> dict:
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }


def evalctl_info() -> dict:
    return {"version": evalctl.__version__, "git_revision": git_revision(Path(evalctl.__file__).parent)}


def write_manifest(run_dir: Path, manifest: dict) -> None:
    tmp = run_dir / (MANIFEST_FILE + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, default=str))
    os.replace(tmp, run_dir / MANIFEST_FILE)


def read_manifest(run_dir: Path) -> dict:
    path = run_dir / MANIFEST_FILE
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{run_dir} has no {MANIFEST_FILE}: not a run folder") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is corrupt: {exc}") from None
