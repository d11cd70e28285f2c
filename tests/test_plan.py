from __future__ import annotations

import pytest

from evalctl.config import load_config
from evalctl.errors import ConfigError
from evalctl.plan import build, expand, noise_cells
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


def test_concurrency_levels_are_cells_of_one_launch_asking_the_same_prompts():
    overrides = {"task": "gsm8k", "shots": [2], "limit": 3, "concurrency": [8, 1], "cache": ["on", "off"], "noise": True}
    cfg = load_config(model="smollm2-135m", overrides=overrides)
    assert cfg.concurrency == [1, 8] and cfg.fewshot == "sampled"  # each request in flight its own few-shot draw
    plan = build(cfg)
    assert len(plan.launches) == 2  # no restart per level
    on, off = plan.launches
    assert [(c.concurrency, c.pass_index) for c in on.cells] == [(1, 1), (8, 1)]
    low, high = (plan.cells[c].prompts for c in on.cells)
    assert low == high and len({p.text[:200] for p in low}) == 3  # paired across levels, distinct prefixes
    assert [c.concurrency for c in noise_cells(cfg, off)] == [1]  # the A/A arm at the lowest level only


def test_one_concurrency_is_an_int_or_a_list_and_only_a_sweep_of_levels_samples_its_prefixes():
    assert load_config(model="smollm2-135m", overrides={"concurrency": 2}).concurrency == [2]
    assert load_config(model="smollm2-135m", overrides={"concurrency": [2]}).fewshot == "shared"
    assert load_config(model="smollm2-135m", overrides={"concurrency": [1, 8], "fewshot": "shared"}).fewshot == "sampled"
    with pytest.raises(ConfigError, match="concurrency"):
        load_config(model="smollm2-135m", overrides={"concurrency": [0, 8]})


def test_a_concurrency_sweep_gives_servers_whose_slots_are_unset_its_highest_level():
    sweep = {"concurrency": [1, 8, 32]}
    assert load_config(model="smollm2-135m", overrides=sweep).servers[0].engine.parallel == 32
    assert load_config(model="smollm2-135m").servers[0].engine.parallel == 4  # one level: the engine's default
    assert load_config(model="smollm2-135m-recall", overrides=sweep).servers[0].engine.parallel == 2  # the config's own
    assert load_config(model="smollm2-135m-vllm", overrides=sweep).servers[0].engine.max_running_requests == 32


def test_what_a_cache_can_hold_is_each_list_a_cell_shares_and_only_the_opening_of_sampled_or_workload_prompts():
    def held(**overrides):
        plan = build(load_config(model="smollm2-135m", overrides={"shots": [12], "limit": 30, **overrides}))
        [cell] = {c.key.shots: c for c in plan.cells.values()}.values()
        return cell, sorted((len(prefix), n) for prefix, n in cell.held)

    cell, lists = held()
    assert [n for _, n in lists] == [6, 12, 12] and len({size for size, _ in lists}) == 1  # three lists of 12 records
    assert sum(p.text.startswith(prefix) for p in cell.prompts for prefix, _ in cell.held) == 30  # each prompt in one list
    assert all(prefix.endswith("\n") for prefix, _ in cell.held)
    assert len(cell.shared_prefix) < lists[0][0]  # the prewarm holds the opening the lists share, not one list
    _, sampled = held(fewshot="sampled")
    assert sampled == [(cell.shared_prefix.rfind("\n") + 1, 30)]  # the instruction, to its line end
    conversation, _ = held(workload="conversation", fewshot="sampled", shots=[4], limit=4)
    assert conversation.held == ((conversation.shared_prefix, len(conversation.prompts)),)  # histories are the workload's own
