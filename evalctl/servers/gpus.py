"""GPU assignment: each GPU-engine profile gets its own contiguous set of `tp` devices, shared with no other profile, so
a launch's command line is the same whether servers run one after another or at once (Slurm), and a sweep that does not
fit the host is refused before anything starts."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence

from evalctl.errors import ConfigError
from evalctl.schema import ServerProfile


def visible_gpus(configured: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> tuple[list[str], str]:
    """GPU ids this sweep may use, and where that list came from (for error messages)."""
    if configured is not None:
        return list(configured), "config `gpus`"
    environ = os.environ if environ is None else environ
    if "CUDA_VISIBLE_DEVICES" in environ:
        ids = [d.strip() for d in environ["CUDA_VISIBLE_DEVICES"].split(",") if d.strip()]
        return ids, f"CUDA_VISIBLE_DEVICES={environ['CUDA_VISIBLE_DEVICES']!r}"
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return [], "no CUDA_VISIBLE_DEVICES and no nvidia-smi"
    try:
        out = subprocess.run([smi, "--query-gpu=index", "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [], f"nvidia-smi failed: {exc}"
    ids = [line.strip() for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []
    return ids, "nvidia-smi"


def assign_gpus(profiles: Sequence[ServerProfile], visible: Sequence[str], source: str = "visible GPUs") -> dict[str, list[str]]:
    """Map each profile whose engine needs GPUs to its devices: pinned `devices` first, then for each other profile,
    in the order listed, the lowest free run of as many consecutive ids as it needs (tp)."""
    gpu_profiles = [p for p in profiles if p.gpus_needed()]
    needed = sum(p.gpus_needed() for p in gpu_profiles)
    if needed > len(visible):
        wants = ", ".join(f"{p.name}: tp={p.gpus_needed()}" for p in gpu_profiles)
        raise ConfigError(
            f"the GPU profiles need {needed} GPUs ({wants}) but {len(visible)} are visible ({source}); "
            "set `gpus` in the config (or --gpus) to the GPUs this sweep may use, or lower tp"
        )
    owner: dict[str, str] = {}
    assigned: dict[str, list[str]] = {}
    for profile in (p for p in gpu_profiles if p.engine.pinned_devices()):
        for device in profile.engine.pinned_devices():
            if device not in visible:
                raise ConfigError(f"server profile {profile.name!r} pins GPU {device}, which is not visible ({source})")
            if device in owner:
                raise ConfigError(f"server profiles {owner[device]!r} and {profile.name!r} both pin GPU {device}")
            owner[device] = profile.name
        assigned[profile.name] = list(profile.engine.pinned_devices())
    for profile in (p for p in gpu_profiles if not p.engine.pinned_devices()):
        n = profile.gpus_needed()
        start = next((i for i in range(len(visible) - n + 1) if not any(d in owner for d in visible[i : i + n])), None)
        if start is None:
            raise ConfigError(f"no {n} contiguous free GPUs left for server profile {profile.name!r} ({source})")
        assigned[profile.name] = list(visible[start : start + n])
        owner.update(dict.fromkeys(assigned[profile.name], profile.name))
    return {p.name: assigned[p.name] for p in gpu_profiles}


def placeholder_gpus(profiles: Sequence[ServerProfile]) -> list[str]:
    """Stand-in ids ($GPU0, ...) for every GPU the profiles need, plus the ids they pin, to preview commands without GPUs."""
    gpu_profiles = [p for p in profiles if p.gpus_needed()]
    pinned = list(dict.fromkeys(d for p in gpu_profiles for d in p.engine.pinned_devices() or []))
    free = sum(p.gpus_needed() for p in gpu_profiles if not p.engine.pinned_devices())
    return pinned + [f"$GPU{i}" for i in range(free)]


def gpu_assignment(servers: list[ServerProfile], gpus: list[str] | None, environ: Mapping[str, str] | None = None) -> dict[str, list[str]]:
    """The sweep's assignment of its `gpus` (None: the visible ones) to its servers; looks for GPUs only when one needs them."""
    if not any(p.gpus_needed() for p in servers):
        return {}
    visible, source = visible_gpus(gpus, environ)
    return assign_gpus(servers, visible, source)
