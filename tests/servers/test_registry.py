"""The engine registry: names, the union of the engines' settings, the cached-token metric contract."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from evalctl.config import config_from_dict, validated, with_external_url
from evalctl.errors import BadInput, ConfigError
from evalctl.manifest import CACHED_TOKENS
from evalctl.schema import ServerProfile, SweepConfig
from evalctl.servers.engines.llamacpp import LlamaCppSettings
from evalctl.servers.engines.vllm import VLLMSettings
from evalctl.servers.registry import ENGINES, adapter_for, engines


def test_registered_engines_and_unknown_names_list_them():
    assert {"llamacpp", "sglang", "vllm"} <= set(ENGINES.names())
    with pytest.raises(BadInput, match="unknown engine 'trtllm'; known: llamacpp, sglang, vllm"):
        adapter_for("trtllm")


def test_every_engine_with_a_cache_counter_records_it_under_the_key_the_check_reads():
    # The cache-engaged check falls back to /metrics only through CACHED_TOKENS: an engine that
    # exports a cached-token counter under another key would silently lose that fallback.
    for adapter in engines():
        if adapter.metrics:
            assert CACHED_TOKENS in adapter.metrics.values(), adapter.name


def config_of(*profiles: dict) -> SweepConfig:
    servers = [{"name": f"p{i}", "model_path": "m", **p} for i, p in enumerate(profiles)]
    return config_from_dict({"model": "m", "servers": servers}, None, "test")


def test_settings_are_the_engines_model_picked_by_name_and_written_back_as_given():
    (profile,) = config_of({"engine": {"name": "vllm", "device": "cpu", "kv_cache_space_gb": 2, "threads": 1}}).servers
    assert isinstance(profile.engine, VLLMSettings) and profile.gpus_needed() == 0
    dumped = profile.model_dump(mode="json")
    assert dumped["engine"]["kv_cache_space_gb"] == 2 and dumped["engine"]["name"] == "vllm"  # under `engine:`, as written
    assert validated({"model": "m", "servers": [dumped]}).servers == [profile]
    gpu, cpu, bare = config_of({"engine": {"name": "vllm", "tp": 4}}, {"engine": {"name": "sglang", "device": "cpu"}}, {}).servers
    assert (gpu.gpus_needed(), cpu.gpus_needed()) == (4, 0)
    assert isinstance(bare.engine, LlamaCppSettings) and config_of({"engine": "sglang"}).servers[0].engine.name == "sglang"


def test_vllm_without_a_worker_process_runs_the_model_in_its_engine_core():
    adapter = adapter_for("vllm")
    inline, default = config_of({"engine": {"name": "vllm", "worker_process": False}}, {"engine": "vllm"}).servers
    assert adapter.engine_env(inline)["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in adapter.engine_env(default)  # vLLM's own default: a worker process


def test_engine_settings_validate_themselves_through_the_registrys_union():
    """The schema is a leaf: given a Settings it keeps it; a name or mapping is picked by the union the registry handed it."""
    assert ServerProfile(name="p", model_path="m", engine=VLLMSettings(tp=2)).gpus_needed() == 2
    assert ServerProfile(name="p", model_path="m", engine={"name": "vllm", "tp": 2}).engine == VLLMSettings(tp=2)
    assert isinstance(ServerProfile(name="p", model_path="m").engine, LlamaCppSettings)  # the default engine
    with pytest.raises(ValidationError, match="'nope'"):
        ServerProfile(name="p", model_path="m", engine="nope")


@pytest.mark.parametrize(
    ("profile", "message"),
    [
        (
            {"engine": {"name": "llamacpp", "tp": 2}},
            "servers.0.engine.tp: not a setting of engine 'llamacpp' "
            "(its own settings: context_length, parallel, threads, speculative, cache_ram_mib)",
        ),
        ({"engine": {"name": "sglang", "parallel": 2}}, "engine.parallel: not a setting of engine 'sglang'"),
        ({"engine": {"name": "vllm", "kv_cache_space_gb": 2}}, "kv_cache_space_gb apply to device cpu only"),
        ({"engine": {"name": "sglang", "max_total_tokens": 4096, "threads": 1}}, "max_total_tokens, threads apply to device cpu only"),
        ({"engine": {"name": "vllm", "tp": 2, "worker_process": False}}, "worker_process: false needs tp 1"),
        ({"engine": "nope"}, "servers.0.engine: unknown engine 'nope'; known: llamacpp, sglang, vllm"),
        ({"engine": {"tp": 2}}, "servers.0.engine: Unable to extract tag using discriminator 'name'"),
    ],
)
def test_a_setting_of_another_engine_is_refused_by_name(profile, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        config_of(profile)


def test_a_url_profile_is_not_launched_and_its_engine_is_named_or_detected():
    config = config_of({})
    named = with_external_url(config, "http://h:1/", "vllm").servers[0]
    assert (named.name, named.url, named.engine, named.gpus_needed()) == ("external", "http://h:1", VLLMSettings(), 0)
    assert with_external_url(config, "http://h:1").servers[0].engine is None  # detected when the server is first asked
    # Settings at a URL describe the server there (e.g. llama.cpp's slots to prewarm); it takes no GPU of the sweep's.
    assert config_of({"url": "http://h:1", "engine": {"name": "vllm", "tp": 4}}).servers[0].gpus_needed() == 0
    with pytest.raises(BadInput, match="known: llamacpp, sglang, vllm"):
        with_external_url(config, "http://h:1", "vlm")
    assert config_of({"engine": None}).servers[0].engine == LlamaCppSettings()  # a server to launch: the default engine
