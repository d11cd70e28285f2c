"""Server-profile and variant fields for GPU engines."""

from __future__ import annotations

import pytest

from evalctl.config import load_config
from evalctl.errors import ConfigError
from evalctl.plan import expand


def write(tmp_path, text: str):
    path = tmp_path / "sweep.yaml"
    path.write_text("model: m\n" + text)
    return path


GPU = """
servers:
  - {name: h100, model_path: m, engine: {name: sglang, tp: 2}}
variants:
  - {name: baseline}
  - {name: patched, python: "${PATCHED_PY}/bin/python", command_prefix: ["srun", "--container-image=$IMAGE"]}
"""


def test_run_variants_selects_and_expands_only_what_runs(tmp_path, monkeypatch):
    monkeypatch.delenv("PATCHED_PY", raising=False)
    cfg = load_config(config_file=write(tmp_path, GPU + "run_variants: [baseline]\n"))
    assert [launch.variant.name for launch in expand(cfg)] == ["baseline", "baseline"]
    assert cfg.servers[0].engine.random_seed == cfg.generation.seed  # the engine seed follows generation.seed

    monkeypatch.setenv("PATCHED_PY", "/opt/patched")
    monkeypatch.setenv("IMAGE", "sglang.sqsh")
    cfg = load_config(config_file=write(tmp_path, GPU), overrides={"run_variants": ["patched"]})
    (patched,) = cfg.active_variants()
    assert patched.python == "/opt/patched/bin/python"
    assert patched.command_prefix == ["srun", "--container-image=sglang.sqsh"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (GPU + "run_variants: [nightly]\n", "unknown variant(s) ['nightly']; known: baseline, patched"),
        (GPU + "run_variants: [patched]\n", "uses unset environment variable PATCHED_PY"),
        (
            "servers:\n  - {name: c, model_path: m, engine: {name: llamacpp, mem_fraction_static: 0.8}}\n",
            "not a setting of engine 'llamacpp'",
        ),
        ("servers:\n  - {name: g, model_path: m, engine: {name: vllm, tp: 2, devices: [0]}}\n", "devices lists 1 GPUs but tp is 2"),
        ("servers:\n  - {name: g, model_path: m, engine: {name: sglang, mamba: {Radix-Cache: x}}}\n", "mamba option names are snake_case"),
    ],
)
def test_bad_profile_and_variant_fields(tmp_path, monkeypatch, text, message):
    monkeypatch.delenv("PATCHED_PY", raising=False)
    with pytest.raises(ConfigError) as exc:
        load_config(config_file=write(tmp_path, text))
    assert message in str(exc.value)


def test_gpu_pool_as_count_or_ids(tmp_path):
    base = GPU + "run_variants: [baseline]\n"
    assert load_config(config_file=write(tmp_path, base + "gpus: 3\n")).gpus == ["0", "1", "2"]
    assert load_config(config_file=write(tmp_path, base + "gpus: [4, 5]\n")).gpus == ["4", "5"]
