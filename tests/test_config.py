from __future__ import annotations

from pathlib import Path

import pytest

from evalctl import config_files
from evalctl.config import load_config
from evalctl.errors import ConfigError
from evalctl.schema import CacheMode
from evalctl.tasks.registry import resolved_data_dir


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    return path


MINIMAL = """
model: tiny
servers:
  - name: cpu
    model_path: bundled:smollm2-135m
"""


def test_alias_resolves_and_overrides_apply():
    cfg = load_config(model="smollm2-135m", overrides={"task": "gsm8k", "shots": [2, 1, 2], "limit": 5, "generation.max_tokens": 16})
    assert cfg.shots == [1, 2]  # sorted, de-duplicated
    assert cfg.limit == 5
    assert cfg.generation.max_tokens == 16
    assert cfg.servers[0].engine.name == "llamacpp"


def test_limit_order_and_seed_are_config_so_the_manifest_records_them():
    saved = load_config(model="smollm2-135m", overrides={"task": "gsm8k"}).model_dump(mode="json")  # what the manifest stores
    assert (saved["limit_order"], saved["limit_seed"]) == ("shuffled", 1234)
    assert load_config(model="smollm2-135m", overrides={"task": "gsm8k", "limit_order": "head"}).limit_order == "head"
    with pytest.raises(ConfigError, match="limit_order"):
        load_config(model="smollm2-135m", overrides={"task": "gsm8k", "limit_order": "first"})


def test_unknown_alias_lists_known_ones():
    with pytest.raises(ConfigError) as exc:
        load_config(model="no-such-model")
    assert "no-such-model" in str(exc.value)
    for name in config_files.known():
        assert name in str(exc.value)


def test_invalid_yaml_is_reported(tmp_path):
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(config_file=write(tmp_path, "model: [unclosed\n"))


def test_unknown_field_is_named(tmp_path):
    with pytest.raises(ConfigError) as exc:
        load_config(config_file=write(tmp_path, MINIMAL + "shotz: [1]\n"))
    assert "shotz: unknown field" in str(exc.value)


def test_nested_unknown_field_is_named(tmp_path):
    text = MINIMAL.replace("model_path:", "gpuz: 2\n    model_path:")
    with pytest.raises(ConfigError) as exc:
        load_config(config_file=write(tmp_path, text))
    told = "servers.0.gpuz: unknown field"
    assert told in str(exc.value)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"shots": [-1, 2]}, "shot counts must be >= 0"),
        ({"shots": []}, "at least one count"),
        ({"limit": 0}, "limit must be >= 1"),
        ({"cache": ["maybe"]}, "cache.0"),
        ({"concurrency": 0}, "concurrency"),
    ],
)
def test_bad_values_are_rejected(tmp_path, override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(config_file=write(tmp_path, MINIMAL), overrides=override)


def test_yaml_booleans_read_as_cache_modes(tmp_path):
    cfg = load_config(config_file=write(tmp_path, MINIMAL + "cache: [on, off]\n"))
    assert cfg.cache == [CacheMode.on, CacheMode.off]


def test_model_or_config_exactly_one(tmp_path):
    with pytest.raises(ConfigError, match="exactly one"):
        load_config()
    with pytest.raises(ConfigError, match="exactly one"):
        load_config(model="smollm2-135m", config_file=write(tmp_path, MINIMAL))


def test_data_dir_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALCTL_DATA_DIR", str(tmp_path))
    cfg = load_config(config_file=write(tmp_path, MINIMAL))
    assert resolved_data_dir(cfg.task, cfg.data_dir) == tmp_path


def test_the_default_is_prefix_recall_and_gsm8k_brings_its_own_settings_under_the_cli():
    default = load_config(model="smollm2-135m")
    assert (default.task, default.shots, default.limit, default.generation.max_tokens) == ("prefix-recall", [8, 16, 32], 80, 5)
    gsm8k = load_config(model="smollm2-135m", overrides={"task": "gsm8k"})
    assert (gsm8k.shots, gsm8k.limit, gsm8k.generation.max_tokens) == ([1, 2, 4, 8], 20, 128)
    assert load_config(model="smollm2-135m", overrides={"task": "gsm8k", "limit": 3}).limit == 3  # the CLI still wins
    assert "task_settings" not in gsm8k.model_dump()  # resolved: a recorded config resumes as it ran
