"""GPU assignment: disjoint contiguous device sets, checked before anything launches."""

from __future__ import annotations

import pytest
from conftest import profile_of

from evalctl.errors import ConfigError
from evalctl.schema import ServerProfile, SweepConfig
from evalctl.servers.gpus import assign_gpus, gpu_assignment, visible_gpus


def profile(name: str, tp: int | None = None, engine: str = "sglang", **settings) -> ServerProfile:
    gpus = {} if tp is None else {"tp": tp}  # a CPU engine has no tp setting (the registry refuses it)
    return profile_of({"name": name, "model_path": "m", "engine": {"name": engine, **gpus, **settings}})


EIGHT = [str(i) for i in range(8)]


def test_tp4_and_tp2_get_disjoint_contiguous_sets():
    got = assign_gpus([profile("big", 4), profile("small", 2, engine="vllm")], EIGHT)
    assert got == {"big": ["0", "1", "2", "3"], "small": ["4", "5"]}


def test_cpu_profiles_take_no_gpus():
    got = assign_gpus([profile("cpu", engine="llamacpp"), profile("gpu", 2)], ["0", "1"])
    assert got == {"gpu": ["0", "1"]}


def test_pinned_devices_are_kept_and_others_fit_around_them():
    got = assign_gpus([profile("a", 2), profile("pinned", 2, devices=[2, 3]), profile("b", 2)], EIGHT[:6])
    assert got == {"a": ["0", "1"], "pinned": ["2", "3"], "b": ["4", "5"]}


def test_too_many_gpus_is_a_clear_error():
    with pytest.raises(ConfigError) as exc:
        assign_gpus([profile("big", 4), profile("small", 2)], ["0", "1", "2", "3"], "CUDA_VISIBLE_DEVICES='0,1,2,3'")
    message = str(exc.value)
    assert "need 6 GPUs (big: tp=4, small: tp=2) but 4 are visible (CUDA_VISIBLE_DEVICES='0,1,2,3')" in message


def test_overlapping_pins_and_invisible_pins_are_errors():
    with pytest.raises(ConfigError, match="both pin GPU 1"):
        assign_gpus([profile("a", 1, devices=[1]), profile("b", 1, devices=[1])], EIGHT)
    with pytest.raises(ConfigError, match="pins GPU 9, which is not visible"):
        assign_gpus([profile("a", 1, devices=[9])], EIGHT)


def test_fragmented_free_gpus_cannot_hold_a_contiguous_set():
    with pytest.raises(ConfigError, match="no 2 contiguous free GPUs left for server profile 'b'"):
        assign_gpus([profile("a", 1, devices=[1]), profile("b", 2)], ["0", "1", "2"])


def test_visible_gpus_sources(monkeypatch):
    assert visible_gpus(["3", "5"]) == (["3", "5"], "config `gpus`")
    ids, source = visible_gpus(None, {"CUDA_VISIBLE_DEVICES": "2,3"})
    assert ids == ["2", "3"] and "CUDA_VISIBLE_DEVICES" in source
    assert visible_gpus(None, {"CUDA_VISIBLE_DEVICES": ""})[0] == []
    monkeypatch.setenv("PATH", "")  # no nvidia-smi
    assert visible_gpus(None, {}) == ([], "no CUDA_VISIBLE_DEVICES and no nvidia-smi")


def test_sweep_assignment_uses_physical_ids_from_the_environment():
    cfg = SweepConfig(model="m", servers=[profile("a", 2), profile("b", 1)])
    assert gpu_assignment(cfg.servers, cfg.gpus, {"CUDA_VISIBLE_DEVICES": "4,5,6"}) == {"a": ["4", "5"], "b": ["6"]}
    cpu_only = SweepConfig(model="m", servers=[profile("cpu", engine="llamacpp")])
    assert gpu_assignment(cpu_only.servers, cpu_only.gpus, {"CUDA_VISIBLE_DEVICES": ""}) == {}
