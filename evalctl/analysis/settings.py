"""Resolved server settings: what each engine said it runs with, compared between runs and variants.

Engines fill in defaults at start-up (SGLang's `auto` Mamba strategy, vLLM's MoE backend for
the GPU at hand, llama.cpp's context per slot), so two runs of one config may not have served
alike. The sweep stores each server's resolved settings in the manifest (`servers[].info`);
these pure functions line them up.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import pandas as pd

from evalctl.manifest import Manifest

SERVER_KEYS = ["profile", "variant", "cache"]
DIFF_COLUMNS = [*SERVER_KEYS, "reference", "setting", "reference_value", "value"]
ServerKey = tuple[str, str, str]


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def server_settings(manifest: Manifest) -> dict[ServerKey, dict[str, str]]:
    """(profile, variant, cache) -> resolved settings, engine version included (a restarted server's last start's, which
    the manifest keeps); servers without any are left out."""
    out = {}
    for server in manifest.servers:
        settings = server.info.get("settings")
        if not isinstance(settings, dict):
            continue
        key = (server.profile, server.variant, server.cache)
        out[key] = {"engine_version": _text(server.info.get("version")), **{k: _text(v) for k, v in settings.items()}}
    return out


def _diff(pairs: Iterable[tuple[ServerKey, str, dict[str, str], dict[str, str]]]) -> pd.DataFrame:
    """One row per setting that differs, of each (server, reference's label, reference's settings, server's settings)."""
    rows = [
        (*key, label, setting, reference.get(setting), settings.get(setting))
        for key, label, reference, settings in pairs
        for setting in sorted(reference.keys() | settings.keys())
        if reference.get(setting) != settings.get(setting)
    ]
    return pd.DataFrame(rows, columns=DIFF_COLUMNS)


def settings_diff_runs(baseline: Manifest, candidate: Manifest) -> pd.DataFrame:
    """Settings that differ between the same server (profile, variant, cache) of two runs' manifests."""
    ref, cand = server_settings(baseline), server_settings(candidate)
    return _diff((key, "baseline run", ref[key], cand[key]) for key in sorted(ref.keys() & cand.keys()))


def settings_diff_variants(manifest: Manifest, baseline_variant: str | None) -> pd.DataFrame:
    """Settings that differ between each variant's server and the baseline variant's (same profile and cache)."""
    servers = server_settings(manifest)
    return _diff(
        ((profile, variant, cache), f"variant {baseline_variant}", servers[(profile, baseline_variant, cache)], settings)
        for (profile, variant, cache), settings in sorted(servers.items())
        if variant != baseline_variant and (profile, baseline_variant, cache) in servers
    )
