"""Resolved server settings: what each engine said it runs with, compared between runs and variants.

Engines fill in defaults at start-up (SGLang's `auto` Mamba strategy, vLLM's MoE backend for
the GPU at hand, llama.cpp's context per slot), so two runs of one config may not have served
alike. The sweep stores each server's resolved settings in the manifest (`servers[].info`);
these pure functions line them up.
"""

from __future__ import annotations

import json

import pandas as pd

SERVER_KEYS = ["profile", "variant", "cache"]
DIFF_COLUMNS = [*SERVER_KEYS, "reference", "setting", "reference_value", "value"]


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def server_settings(manifest: dict) -> dict[tuple[str, str, str], dict[str, str]]:
    """(profile, variant, cache) -> resolved settings, engine version included; servers without any are left out.

    A restarted server keeps the settings of its last start (the manifest keeps only those).
    """
    out = {}
    for server in manifest.get("servers") or []:
        info = server.get("info") or {}
        settings = info.get("settings")
        if not isinstance(settings, dict):
            continue
        key = (str(server.get("profile")), str(server.get("variant")), str(server.get("cache")))
        out[key] = {"engine_version": _text(info.get("version")), **{k: _text(v) for k, v in settings.items()}}
    return out


def _diff(reference: dict[str, str], candidate: dict[str, str]) -> list[tuple[str, str | None, str | None]]:
    return [
        (k, reference.get(k), candidate.get(k)) for k in sorted(reference.keys() | candidate.keys()) if reference.get(k) != candidate.get(k)
    ]


def _frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=DIFF_COLUMNS)


def settings_diff_runs(baseline: dict, candidate: dict) -> pd.DataFrame:
    """Settings that differ between the same server (profile, variant, cache) of two runs' manifests."""
    ref, cand = server_settings(baseline), server_settings(candidate)
    rows = []
    for key in sorted(ref.keys() & cand.keys()):
        for setting, before, after in _diff(ref[key], cand[key]):
            rows.append(dict(zip(SERVER_KEYS, key), reference="baseline run", setting=setting, reference_value=before, value=after))
    return _frame(rows)


def settings_diff_variants(manifest: dict, baseline_variant: str | None) -> pd.DataFrame:
    """Settings that differ between each variant's server and the baseline variant's (same profile and cache)."""
    servers = server_settings(manifest)
    rows = []
    for (profile, variant, cache), settings in sorted(servers.items()):
        ref = servers.get((profile, str(baseline_variant), cache))
        if variant == baseline_variant or ref is None:
            continue
        for setting, before, after in _diff(ref, settings):
            rows.append(
                dict(
                    profile=profile,
                    variant=variant,
                    cache=cache,
                    reference=f"variant {baseline_variant}",
                    setting=setting,
                    reference_value=before,
                    value=after,
                )
            )
    return _frame(rows)
