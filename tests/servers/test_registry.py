"""The engine registry: names, per-engine settings, flat records, the cached-token metric contract."""

from __future__ import annotations

import pytest

from evalctl.config import ConfigError, ServerProfile, SweepConfig, with_external_url
from evalctl.errors import UnknownName
from evalctl.manifest import CACHED_TOKENS
from evalctl.servers.engines.vllm import VLLMSettings
from evalctl.servers.registry import adapter_for, engine_names, engines


def test_registered_engines_and_unknown_names_list_them():
    assert {"external", "llamacpp", "sglang", "vllm"} <= set(engine_names())
    with pytest.raises(UnknownName, match="unknown engine 'trtllm'; known: external, llamacpp, sglang, vllm"):
        adapter_for("trtllm")


def test_every_engine_with_a_cache_counter_records_it_under_the_key_the_check_reads():
    # The cache-engaged check falls back to /metrics only through CACHED_TOKENS: an engine that
    # exports a cached-token counter under another key would silently lose that fallback.
    for adapter in engines():
        if adapter.metrics:
            assert CACHED_TOKENS in adapter.metrics.values(), adapter.name


def test_settings_are_typed_per_engine_and_written_back_flat():
    profile = ServerProfile(name="v", engine="vllm", model_path="m", device="cpu", kv_cache_space_gb=2, threads=1)
    assert isinstance(profile.settings, VLLMSettings) and profile.settings.gpus_needed() == 0
    dumped = profile.model_dump(mode="json")
    assert dumped["kv_cache_space_gb"] == 2 and "settings" not in dumped  # as the YAML was written
    assert ServerProfile.model_validate(dumped) == profile
    assert ServerProfile(name="g", engine="vllm", model_path="m", tp=4).settings.gpus_needed() == 4
    assert ServerProfile(name="c", engine="sglang", model_path="m", device="cpu").settings.gpus_needed() == 0


@pytest.mark.parametrize(
    ("profile", "message"),
    [
        (
            {"engine": "llamacpp", "tp": 2},
            "tp: not a setting of engine 'llamacpp' (its own settings: context_length, parallel, threads, speculative)",
        ),
        ({"engine": "sglang", "parallel": 2}, "parallel: not a setting of engine 'sglang'"),
        ({"engine": "vllm", "kv_cache_space_gb": 2}, "kv_cache_space_gb apply to device cpu only"),
        ({"engine": "sglang", "max_total_tokens": 4096, "threads": 1}, "max_total_tokens, threads apply to device cpu only"),
        ({"engine": "nope"}, "unknown engine 'nope'; known: external, llamacpp, sglang, vllm"),
    ],
)
def test_a_setting_of_another_engine_is_refused_by_name(profile, message):
    from evalctl.config import config_from_dict

    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        config_from_dict({"model": "m", "servers": [{"name": "p", "model_path": "m", **profile}]}, None, "test")


def test_url_engine_is_checked_against_the_registry():
    config = SweepConfig.model_validate({"model": "m", "servers": [{"name": "p", "model_path": "m"}]})
    assert with_external_url(config, "http://h:1", "vllm").servers[0].serves == "vllm"
    with pytest.raises(UnknownName, match="known: external, llamacpp"):
        with_external_url(config, "http://h:1", "vlm")
