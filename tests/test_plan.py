from __future__ import annotations

from evalctl.config import load_config
from evalctl.plan import expand
from evalctl.schema import CacheMode


def test_one_launch_per_profile_variant_cache_and_all_shots_inside():
    cfg = load_config(model="smollm2-135m", overrides={"task": "gsm8k", "shots": [8, 12], "passes": 2, "cache": ["on", "off"]})
    launches = expand(cfg)
    assert [(launch.profile.name, launch.cache) for launch in launches] == [("cpu", CacheMode.on), ("cpu", CacheMode.off)]
    cells = launches[0].cells
    # every shot count and pass against the same server, pass 2 right after pass 1
    assert [(c.shots, c.pass_index) for c in cells] == [(8, 1), (8, 2), (12, 1), (12, 2)]
    assert all(c.cache is CacheMode.on for c in cells)


def test_launch_count_scales_with_profiles_and_variants(tmp_path):
    path = tmp_path / "two.yaml"
    path.write_text(
        """
model: m
shots: [1]
cache: ["on"]
servers:
  - {name: a, model_path: x}
  - {name: b, model_path: x}
variants:
  - {name: baseline}
  - {name: patched}
"""
    )
    launches = expand(load_config(config_file=path))
    assert [(launch.profile.name, launch.variant.name) for launch in launches] == [
        ("a", "baseline"),
        ("a", "patched"),
        ("b", "baseline"),
        ("b", "patched"),
    ]
